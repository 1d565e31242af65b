"""Settings come from the environment; every default is the embedded, single-machine setup."""
import os
from pathlib import Path

import dj_database_url

from config.secret_key import embedded_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FORGESTENCIL_VAR_DIR") or BASE_DIR / "var")  # set but empty: the default, never the working folder
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Off unless asked for: `./dev run` (the demo) sets DEBUG=true. Error pages mask secrets either way.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or embedded_secret_key(VAR_DIR)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
DEFAULT_EXCEPTION_REPORTER = "config.error_pages.SecretMaskingReporter"
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.error_pages.SecretMaskingFilter"
# The rest of `manage.py check --deploy`, from the environment; off by default (plain HTTP on 127.0.0.1).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# Behind a proxy that terminates TLS and sets X-Forwarded-Proto (never trust it otherwise).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("TRUST_X_FORWARDED_PROTO", False) else None
# Request bodies (JSON included: frontend.middleware.RequestLimitsMiddleware) and login throttling.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
LOGIN_FAILURES_PER_USER = int(os.environ.get("LOGIN_FAILURES_PER_USER", "5"))
LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("LOGIN_FAILURES_PER_ADDRESS", "20"))
LOGIN_LOCKOUT_SECONDS = int(os.environ.get("LOGIN_LOCKOUT_SECONDS", "900"))
AUTHENTICATION_BACKENDS = ["frontend.login_throttle.ThrottledModelBackend"]
CACHE_URL = os.environ.get("CACHE_URL", "")
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL} if CACHE_URL
          else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "ledger",
    "measurement",
    "forge",
    "appgate",
    "frontend",
]

MIDDLEWARE = [
    "frontend.middleware.RequestLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "frontend.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database_from_url(url: str) -> dict:
    config = dj_database_url.parse(url, conn_max_age=60)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE transactions take the write lock up front: appends serialise instead of
        # failing with "database is locked" on upgrade; WAL lets readers run beside the writer.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 60,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        config["CONN_MAX_AGE"] = 0
        config["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    return config


DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'ledger.sqlite3'}")
DATABASES = {"default": _database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
LOGIN_URL = "login"  # the audit site's own login page (frontend), not the admin's

API_ANONYMOUS_READ = env_bool("API_ANONYMOUS_READ", True)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["ledger.api.permissions.ReadableLedger"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ForgeStencil Ledger API",
    "DESCRIPTION": "Read-only access to the event-sourced ledger of forged stencil kernels and their gates.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI served from the app itself (drf-spectacular-sidecar): no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", CELERY_BROKER_URL or None)
CELERY_TASK_DEFAULT_QUEUE = "cpu"
# Two queues: `cpu` (ledger work, CPU measurements, CPU forging rounds) and `gpu` (rounds and
# measurements of the cuda backend; callers pick the queue by backend). GPU hosts run
# `celery -A config worker -Q gpu --concurrency 1`, one measurement at a time per GPU.
CELERY_TASK_QUEUES = {"cpu": {"exchange": "cpu", "routing_key": "cpu"}, "gpu": {"exchange": "gpu", "routing_key": "gpu"}}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # a pool child killed mid-task: the message goes back to the queue
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Redis hands an unacknowledged message to another worker after this long, so it must exceed the
# longest task: a forging round can gate twice (its candidate, then a due branch's head), each
# gate at most 3 CPU check children x 300 s plus 3 timing attempts x 900 s (ProtocolSettings):
# 7200 s. A duplicate delivered earlier is harmless (every task claims its work first), only
# wasted; the ledger side of a dead worker is the reaper's business, not redelivery's.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": float(os.environ.get("CELERY_VISIBILITY_TIMEOUT_S", "7200"))}
# Leases of running work (ledger/leases.py): refreshed every WORKER_HEARTBEAT_S; a lease not
# refreshed for WORKER_LEASE_S is dead, and the reaper (beat, every REAPER_INTERVAL_S) closes
# its work with an abandoned event. `forge run` stops waiting for a round that no worker took
# within FORGE_ROUND_CLAIM_TIMEOUT_S.
WORKER_HEARTBEAT_S = float(os.environ.get("WORKER_HEARTBEAT_S", "10"))
WORKER_LEASE_S = float(os.environ.get("WORKER_LEASE_S", "60"))
REAPER_INTERVAL_S = float(os.environ.get("REAPER_INTERVAL_S", "60"))
FORGE_ROUND_CLAIM_TIMEOUT_S = float(os.environ.get("FORGE_ROUND_CLAIM_TIMEOUT_S", "600"))
CELERY_BEAT_SCHEDULE = {"reap": {"task": "ledger.reap", "schedule": REAPER_INTERVAL_S, "options": {"queue": "cpu", "expires": REAPER_INTERVAL_S}}}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Ed25519 checkpoint signing. LEDGER_SIGNING_KEY is a base64 32-byte seed; without it a key
# is generated once into var/ (embedded default). LEDGER_TRUSTED_PUBLIC_KEYS (comma-separated
# base64) lists further keys whose past checkpoints verify accepts, e.g. after a key rotation.
LEDGER_SIGNING_KEY = os.environ.get("LEDGER_SIGNING_KEY", "")
LEDGER_SIGNING_KEY_FILE = VAR_DIR / "checkpoint-signing.key"
LEDGER_TRUSTED_PUBLIC_KEYS = [k.strip() for k in os.environ.get("LEDGER_TRUSTED_PUBLIC_KEYS", "").split(",") if k.strip()]
# A file of further trusted public keys, one base64 key a line (empty: none); by default the
# project's publication key, which signs the shipped exports (ledger/trust.py).
LEDGER_TRUSTED_KEYS_FILE = os.environ.get("LEDGER_TRUSTED_KEYS_FILE", str(BASE_DIR / "fixtures" / "keys" / "trusted_keys.txt"))
