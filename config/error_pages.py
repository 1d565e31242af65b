"""Error pages that never show a secret (settings DEFAULT_EXCEPTION_REPORTER and
DEFAULT_EXCEPTION_REPORTER_FILTER).

Django's debug page (DEBUG on) lists the settings, the request's META (under runserver that is
the whole process environment: DATABASE_URL, the broker URL, keys) and every frame's local
variables. Its stock filter hides names matching API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE, which
misses URLs with passwords in them (DATABASE_URL, CELERY_BROKER_URL, CELERY_RESULT_BACKEND). The
filter here also hides names with URL, BROKER, BACKEND or DSN in them, and the reporter masks
the *values* of every such setting or environment variable wherever they appear on the page
(an exception message, a local variable of any name, a repr), so a secret is masked whatever
holds it.
"""
from __future__ import annotations

import os
import re

from django.conf import settings
from django.utils.html import escape
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

SECRET_NAMES = re.compile(r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|BROKER|BACKEND|DSN", re.IGNORECASE)
# A value shorter than this is not masked wherever it appears (it would blank out words like
# "true" or "cpu"); the setting or variable holding it is still masked by its name.
MIN_MASKED_VALUE = 8


def secret_values() -> set[str]:
    """The values of every setting and environment variable whose name says it is secret."""
    values = [getattr(settings, name) for name in dir(settings) if name.isupper() and SECRET_NAMES.search(name)]
    values += [value for name, value in os.environ.items() if SECRET_NAMES.search(name)]
    return {value for value in values if isinstance(value, str) and len(value) >= MIN_MASKED_VALUE}


class SecretMaskingFilter(SafeExceptionReporterFilter):
    """Hides settings, META entries and frame variables by name (the stock rule, plus URLs)."""

    hidden_settings = SECRET_NAMES

    def get_traceback_frame_variables(self, request, tb_frame):
        return [(name, self.cleansed_substitute if SECRET_NAMES.search(name) else value)
                for name, value in super().get_traceback_frame_variables(request, tb_frame)]


class SecretMaskingReporter(ExceptionReporter):
    """The debug page and its text version with every secret value replaced by the mask."""

    def get_traceback_html(self) -> str:
        return _masked(super().get_traceback_html())

    def get_traceback_text(self) -> str:
        return _masked(super().get_traceback_text())


def _masked(page: str) -> str:
    # Longest first: a URL that contains a shorter secret is masked whole.
    # The HTML page shows a value escaped (& as &amp;): mask both spellings.
    for value in sorted(secret_values(), key=len, reverse=True):
        for spelling in (value, escape(value)):
            page = page.replace(spelling, SafeExceptionReporterFilter.cleansed_substitute)
    return page
