from django.apps import AppConfig


class ForgeConfig(AppConfig):
    """The Kernel Agent: forging rounds, proposers, the operator map (issue 4)."""

    name = "forge"
