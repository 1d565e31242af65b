from django.apps import AppConfig
from django.db.models.signals import post_migrate

PERMISSIONS = {  # declared on frontend.models.Review
    "sign_off": "Sign off a result's current version",
    "request_rerun": "Request a gate re-run of a case or an application",
    "retract_result": "Retract a result with a reason",
    "freeze_publication": "Freeze the published tables",
}
# Reviewer: sign off, request re-runs. Maintainer: also retract and freeze.
GROUPS = {
    "Reviewer": ["sign_off", "request_rerun"],
    "Maintainer": ["sign_off", "request_rerun", "retract_result", "freeze_publication"],
}


def ensure_groups(group_model, permission_model, content_type_model) -> None:
    """Create the groups with their permissions (idempotent). Takes the models as arguments so
    that the data migration can pass its historical ones."""
    content_type, _ = content_type_model.objects.get_or_create(app_label="frontend", model="review")
    for name, codenames in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        permissions = [
            permission_model.objects.get_or_create(content_type=content_type, codename=codename,
                                                   defaults={"name": PERMISSIONS[codename]})[0]
            for codename in codenames
        ]
        group.permissions.add(*permissions)


def _groups_after_migrate(**kwargs) -> None:
    """Also after a flush (which empties auth_group, e.g. between transactional tests)."""
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType

    ensure_groups(Group, Permission, ContentType)


class FrontendConfig(AppConfig):
    """The reviewers' audit UI, server-rendered."""

    name = "frontend"

    def ready(self) -> None:
        from ledger import leases

        post_migrate.connect(_groups_after_migrate, sender=self)
        leases.register("rerun", "frontend.reruns.abandon_rerun")  # the reaper closes a dead worker's re-run with it
