"""Login throttling: after too many failed logins for one username, or from one address, within
a window, every login for it is refused until the window ends, correct password or not.

Enforced in the authentication backend, so every login form (the audit site's, the admin's) and
every other caller of django.contrib.auth.authenticate is covered. Failures are counted in
Django's cache (CACHE_URL: the local-memory cache of one process by default, Redis to share the
counts between several server processes) from the user_login_failed signal, which Django sends
for wrong passwords and for refused attempts alike; a refused attempt therefore counts too, but
the window is fixed (it starts with the first failure and is not extended by later ones).

The address is REMOTE_ADDR: behind a reverse proxy that is the proxy's address, so the per-address
limit then applies to all clients together (X-Forwarded-For is not trusted: clients set it).
Anyone can lock a known username out for one window by failing on purpose; the per-username
limit accepts that in exchange for stopping password guessing spread over many addresses.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest

KEY_PREFIX = "login-failures"


def _counters(username: str, request: HttpRequest | None) -> list[tuple[str, int]]:
    """(cache key, allowed failures) of the username and of the client's address."""
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    counters = [(f"{KEY_PREFIX}:user:{name}", settings.LOGIN_FAILURES_PER_USER)]
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    if address:
        counters.append((f"{KEY_PREFIX}:address:{address}", settings.LOGIN_FAILURES_PER_ADDRESS))
    return counters


def locked(username: str, request: HttpRequest | None) -> bool:
    """Has the username or the address used up its failures in the current window?"""
    counters = _counters(username, request)
    counts = cache.get_many([key for key, _ in counters])
    return any(counts.get(key, 0) >= allowed for key, allowed in counters)


def record_failure(username: str, request: HttpRequest | None) -> None:
    for key, _ in _counters(username, request):
        # add() starts the window (a no-op when it runs); incr() keeps the key's expiry.
        cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: a new window starts
            cache.add(key, 1, timeout=settings.LOGIN_LOCKOUT_SECONDS)


@receiver(user_login_failed)
def _count_failure(sender, credentials: dict, request: HttpRequest | None = None, **kwargs) -> None:
    record_failure(str(credentials.get("username", "")), request)


class ThrottledModelBackend(ModelBackend):
    """Django's model backend, refusing outright while the username or address is locked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is not None and locked(str(username), request):
            raise PermissionDenied("too many failed logins")
        return super().authenticate(request, username=username, password=password, **kwargs)
