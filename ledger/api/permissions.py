from django.conf import settings
from rest_framework.permissions import BasePermission


class ReadableLedger(BasePermission):
    """Anonymous users may read only when API_ANONYMOUS_READ is on (checked per request).

    The ledger API has no write endpoints; views that write declare their own permissions.
    """

    def has_permission(self, request, view) -> bool:
        return settings.API_ANONYMOUS_READ or bool(request.user and request.user.is_authenticated)
