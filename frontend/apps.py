from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """The reviewers' audit UI, server-rendered."""

    name = "frontend"
