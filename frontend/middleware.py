"""Two guards on every request: a bounded request body, and a Content-Security-Policy header.

Body: Django checks DATA_UPLOAD_MAX_MEMORY_SIZE only when `request.body` or `request.POST` is
read; Django REST framework's parsers read the request stream directly, so a JSON body of any
size reached the views (a 20 MiB sign-off comment was stored). The declared length is checked
here, before any view or parser reads a byte; a body without a declared length is read by
neither Django nor DRF (both take a missing CONTENT_LENGTH as an empty body). The site takes no
file uploads, so the one limit covers every body.

CSP: the pages load scripts only from the site itself (plotly.min.js, the page scripts under
static/frontend/, Swagger UI's bundle): `script-src 'self'` with no inline script. Styles allow
'unsafe-inline' because plotly.js writes <style> elements and style attributes at run time;
that is the one relaxation, and it lets in styling, not code.
"""
from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0  # Django and DRF read an unparsable length as no body at all


class RequestLimitsMiddleware:
    """413 for a body longer than DATA_UPLOAD_MAX_MEMORY_SIZE, before anything reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit, length = settings.DATA_UPLOAD_MAX_MEMORY_SIZE, _declared_length(request)
        if limit is not None and length > limit:
            detail = f"request body too large: {length} bytes, the limit is {limit}"
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": detail}, status=413)
            return HttpResponse(detail, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Sets the site's policy on every response that does not carry one of its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
