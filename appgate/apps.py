from django.apps import AppConfig


class AppgateConfig(AppConfig):
    """The App Agent and the application gate (issue 5)."""

    name = "appgate"
