"""Web hardening: DEBUG off by default, no secret on a 500 page even with DEBUG on, the
Content-Security-Policy header, login throttling, and `check --deploy` clean with the
environment variables of a deployment set."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import path

from frontend.middleware import CONTENT_SECURITY_POLICY

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {
    "DATABASE_URL": "postgres://ledger:db-pass-31337@db.internal:5432/ledger",
    "CELERY_BROKER_URL": "redis://:broker-pass-31337@redis.internal:6379/0",
    "CELERY_RESULT_BACKEND": "redis://:result-pass-31337@redis.internal:6379/1",
    "SECRET_KEY": "django-secret-31337-abcdefghijklmnopqrstuvwxyz",
    "LEDGER_SIGNING_KEY": "c2lnbmluZy1rZXktMzEzMzctMzEzMzctMzEzMzctMzE=",
    "SOME_API_TOKEN": "token-31337-value",
}


def failing_view(request):
    target = SECRETS["DATABASE_URL"]  # a local variable whose name says nothing, holding a secret
    raise RuntimeError(f"could not reach {target} with {SECRETS['SOME_API_TOKEN']}")


urlpatterns = [path("boom/", failing_view)]


def run_with(environment: dict[str, str], *arguments: str) -> subprocess.CompletedProcess:
    """A fresh interpreter whose environment holds only `environment` (settings are read at start)."""
    env = {"PATH": os.environ["PATH"], "FORGESTENCIL_VAR_DIR": os.environ["FORGESTENCIL_VAR_DIR"], **environment}
    return subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True)


def settings_module_value(name: str, environment: dict[str, str]) -> str:
    return run_with(environment, "-c", f"import config.settings as s; print(s.{name})").stdout.strip()


def test_debug_is_off_unless_set():
    assert settings_module_value("DEBUG", {}) == "False"
    assert settings_module_value("DEBUG", {"DEBUG": "true"}) == "True"


@override_settings(ROOT_URLCONF=__name__, DEBUG=True, **{k: v for k, v in SECRETS.items() if k != "SOME_API_TOKEN"})
def test_a_500_page_with_debug_on_shows_no_secret(monkeypatch):
    monkeypatch.setenv("SOME_API_TOKEN", SECRETS["SOME_API_TOKEN"])
    # The request's META carries the secrets too, as it does under runserver (the whole environment).
    response = Client(raise_request_exception=False).get("/boom/", **SECRETS)
    page = response.content.decode()
    assert response.status_code == 500 and "RuntimeError" in page and "failing_view" in page  # the debug page
    assert "CELERY_BROKER_URL" in page and "DATABASE_URL" in page  # the names are listed ...
    shown = [name for name, value in SECRETS.items() if value in page or value.split("@")[0] in page]
    assert shown == []  # ... their values are not


def test_every_response_carries_the_content_security_policy(ledger):
    for url in ("/", "/api/events/", "/api/docs/", "/accounts/login/"):
        response = Client().get(url)
        assert response.status_code == 200 and response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, url
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY and "unsafe-eval" not in CONTENT_SECURITY_POLICY


def test_no_page_holds_an_inline_script():
    """The policy allows no inline script: every <script> of the templates loads a file or holds JSON data."""
    templates = list((ROOT / "frontend" / "templates").rglob("*.html"))
    inline = [f"{t.name}: {tag}" for t in templates for tag in re.findall(r"<script[^>]*>", t.read_text())
              if "src=" not in tag and 'type="application/json"' not in tag]
    assert templates and inline == []


@pytest.fixture
def throttle_counts():
    cache.clear()
    yield
    cache.clear()


def login(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


@override_settings(LOGIN_FAILURES_PER_USER=3, LOGIN_FAILURES_PER_ADDRESS=4)
def test_failed_logins_lock_the_username_then_the_address(db, throttle_counts):
    User.objects.create_user("rita", password="right")
    User.objects.create_user("bob", password="right")
    client = Client()
    assert [login(client, "rita", "wrong").status_code for _ in range(3)] == [200, 200, 429]
    refused = login(client, "rita", "right", address="10.0.0.2")  # the right password, from elsewhere
    assert refused.status_code == 429 and "Too many failed logins" in refused.content.decode()
    assert not client.session.get("_auth_user_id")
    assert not Client().login(username="rita", password="right")  # any caller of authenticate (the admin's form too)
    assert login(Client(), "bob", "right").status_code == 302  # 3 failures so far from 10.0.0.1: under 4
    login(client, "bob", "wrong")
    assert login(Client(), "bob", "right").status_code == 429  # the address has used up its 4
    assert login(Client(), "bob", "right", address="10.0.0.3").status_code == 302
    cache.clear()  # the window ends
    assert login(Client(), "rita", "right").status_code == 302


DEPLOYMENT = {"SECURE_SSL_REDIRECT": "true", "SECURE_HSTS_SECONDS": "31536000", "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
              "SECURE_HSTS_PRELOAD": "true", "SESSION_COOKIE_SECURE": "true", "CSRF_COOKIE_SECURE": "true",
              "ALLOWED_HOSTS": "ledger.example.org"}


def check_deploy(environment: dict[str, str]) -> subprocess.CompletedProcess:
    return run_with(environment, "manage.py", "check", "--deploy", "--fail-level", "WARNING")


def test_check_deploy_is_clean_with_the_deployment_variables_set():
    clean = check_deploy(DEPLOYMENT)
    assert clean.returncode == 0, clean.stderr
    plain = check_deploy({})  # the embedded default: plain HTTP on 127.0.0.1
    assert plain.returncode == 1
    assert {code for code in ("W004", "W008", "W012", "W016") if code in plain.stderr} == {"W004", "W008", "W012", "W016"}
