from django.apps import AppConfig


class MeasurementConfig(AppConfig):
    """Cases, the float64 oracle, CPU/CUDA backends and the operator gate (issue 3)."""

    name = "measurement"
