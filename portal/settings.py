"""Django settings, all read from environment variables (every one: docs/reference/settings.md)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_int, env_list, env_secret, env_str, generated_secret, site_slot

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PADDLECLOUD_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", True)
# The embedded single-host portal that `make run` starts (scripts/common.sh sets this): loopback
# only, on secrets generated into VAR_DIR, SQLite and the filesystem broker. portal.checks accepts
# those defaults with DEBUG off only in this mode, and only with loopback ALLOWED_HOSTS.
PADDLECLOUD_EMBEDDED = env_bool("PADDLECLOUD_EMBEDDED", False)
LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

# Secrets missing from the environment are generated once into the var directory (mode 0600) so a
# fresh checkout runs; the system check in portal.checks refuses that when DEBUG is off, unless embedded.
GENERATED_SECRET_FILES: dict[str, Path] = {}

_secret_key = env_secret("SECRET_KEY")
if not _secret_key:
    GENERATED_SECRET_FILES["SECRET_KEY"] = VAR_DIR / "secret_key"
    _secret_key = generated_secret(VAR_DIR / "secret_key", lambda: secrets.token_urlsafe(50))
SECRET_KEY = _secret_key

_encryption_keys = env_secret("PADDLECLOUD_ENCRYPTION_KEY")
if not _encryption_keys:
    GENERATED_SECRET_FILES["PADDLECLOUD_ENCRYPTION_KEY"] = VAR_DIR / "encryption_key"
    _encryption_keys = generated_secret(VAR_DIR / "encryption_key", lambda: Fernet.generate_key().decode())
# Comma-separated Fernet keys, newest first: data is encrypted with the first, read with any.
PADDLECLOUD_ENCRYPTION_KEYS = [k.strip() for k in _encryption_keys.split(",") if k.strip()]
for _index, _key in enumerate(PADDLECLOUD_ENCRYPTION_KEYS):
    try:
        Fernet(_key)
    except ValueError:
        raise ImproperlyConfigured(
            f"PADDLECLOUD_ENCRYPTION_KEY: key #{_index + 1} is not a Fernet key "
            "(32 url-safe base64-encoded bytes; make one with "
            "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)"
        ) from None

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", LOOPBACK_HOSTS if DEBUG or PADDLECLOUD_EMBEDDED else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "csp",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "accounts",
    "datacenters",
    "registry",
    "health",
    "notifications",
    "jobs",
    "images",
    "experiments",
    "storage",
]

MIDDLEWARE = [
    # First: the kubelet's probes name the pod's IP as Host, which ALLOWED_HOSTS rightly refuses.
    "health.probes.probes",
    "portal.middleware.streams_let_go_of_database",  # outermost but the probes: after every other middleware
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    "portal.middleware.instance_header",
    "portal.middleware.refuse_nul_bytes",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context.site",
            ],
        },
    },
]

DATABASE_URL = env_secret("DATABASE_URL")
try:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
            conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        )
    }
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
# How long one statement may wait or run, so no request holds a lock or a connection for longer.
PADDLECLOUD_DB_BUSY_TIMEOUT = env_int("PADDLECLOUD_DB_BUSY_TIMEOUT", 30, minimum=1)  # seconds (SQLite)
PADDLECLOUD_DB_STATEMENT_TIMEOUT = env_int("PADDLECLOUD_DB_STATEMENT_TIMEOUT", 30, minimum=0)  # seconds (PostgreSQL)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web process and workers write to one file. WAL lets readers go on while one writer
    # writes; IMMEDIATE takes the write lock at BEGIN so read-then-write transactions serialize
    # instead of deadlocking; the busy timeout waits for the lock rather than failing at once.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": PADDLECLOUD_DB_BUSY_TIMEOUT,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _pg_options = DATABASES["default"].setdefault("OPTIONS", {})
    # An unreachable server fails a request (and /readyz) in seconds, not after the OS's TCP timeout.
    _pg_options.setdefault("connect_timeout", 5)
    if PADDLECLOUD_DB_STATEMENT_TIMEOUT:
        # The server cancels a statement that runs longer (0: no bound). Celery workers share it.
        _pg_options["options"] = (
            f"{_pg_options.get('options', '')} -c statement_timeout={PADDLECLOUD_DB_STATEMENT_TIMEOUT * 1000}"
        ).strip()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

PADDLECLOUD_CACHE_URL = env_secret("PADDLECLOUD_CACHE_URL")
# Values are JSON, never pickles (core/cache.py): whoever can write an entry cannot make the portal run code.
CACHES = {
    "default": (
        {"BACKEND": "core.cache.RedisCache", "LOCATION": PADDLECLOUD_CACHE_URL}
        if PADDLECLOUD_CACHE_URL
        # File-based so login throttling is shared by every web worker on one host.
        else {"BACKEND": "core.cache.FileBasedCache", "LOCATION": str(VAR_DIR / "cache")}
    )
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# The portal image collects static files at build time into its own (read-only) folder.
STATIC_ROOT = Path(env_str("PADDLECLOUD_STATIC_ROOT", str(VAR_DIR / "static"))).resolve()
if not STATIC_ROOT.is_dir():  # never mkdir on a read-only root filesystem where it already exists
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise

# The embedded portal is plain HTTP on loopback: Secure cookies would never come back from a browser.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG and not PADDLECLOUD_EMBEDDED)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG and not PADDLECLOUD_EMBEDDED)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Security headers -------------------------------------------------------------------------
# SecurityMiddleware and XFrameOptionsMiddleware already send X-Content-Type-Options: nosniff,
# Referrer-Policy: same-origin, Cross-Origin-Opener-Policy: same-origin and X-Frame-Options: DENY.
# Every script and style of our pages, the admin's and Swagger UI's is a file from this origin
# (no inline code; Swagger UI's inline <style> carries the request's nonce), so the policy allows
# nothing else. Swagger UI shows its icons as data: images.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Powerful browser features no page of the portal uses, switched off for it and anything it embeds.
PERMISSIONS_POLICY: dict[str, list[str]] = {
    feature: []
    for feature in (
        "accelerometer", "autoplay", "camera", "display-capture", "encrypted-media", "fullscreen",
        "geolocation", "gyroscope", "magnetometer", "microphone", "midi", "payment", "publickey-credentials-get",
        "screen-wake-lock", "serial", "usb", "xr-spatial-tracking",
    )
}  # fmt: skip
# A per-start value `make run` checks, so it never mistakes another program on its port for the portal.
PADDLECLOUD_INSTANCE = env_str("PADDLECLOUD_INSTANCE", "")

# --- PaddleCloud -----------------------------------------------------------------------------
# Signup (accounts/views.py): `open` suits the embedded portal on one machine; a shared portal asks for approval.
PADDLECLOUD_SIGNUP = env_choice("PADDLECLOUD_SIGNUP", ("open", "approval", "closed"), "open")
PADDLECLOUD_SIGNUP_RATE = env_str("PADDLECLOUD_SIGNUP_RATE", "5/h")
for _replaced in ("PADDLECLOUD_SIGNUP_ENABLED", "PADDLECLOUD_SIGNUP_REQUIRES_APPROVAL"):
    if _replaced in os.environ:
        raise ImproperlyConfigured(f"{_replaced} is replaced by PADDLECLOUD_SIGNUP=open|approval|closed")
PADDLECLOUD_TOKEN_TTL_DAYS = env_int("PADDLECLOUD_TOKEN_TTL_DAYS", 30, minimum=1)
# Failed logins allowed (accounts/throttle.py): per (client address, username), per username
# from anywhere, and per client address over all usernames (high: many users may share one address).
PADDLECLOUD_LOGIN_RATE = env_str("PADDLECLOUD_LOGIN_RATE", "10/min")
PADDLECLOUD_LOGIN_USER_RATE = env_str("PADDLECLOUD_LOGIN_USER_RATE", "30/min")
PADDLECLOUD_LOGIN_ADDRESS_RATE = env_str("PADDLECLOUD_LOGIN_ADDRESS_RATE", "100/min")
# Proxies in front of the portal that append to X-Forwarded-For; 0 believes only the socket's address.
PADDLECLOUD_TRUSTED_PROXIES = env_int("PADDLECLOUD_TRUSTED_PROXIES", 0, minimum=0)
PADDLECLOUD_PUBLIC_URL = env_str("PADDLECLOUD_PUBLIC_URL", "http://127.0.0.1:8000")

# --- Notifications (notifications) ---------------------------------------------------------
# Email: the console backend (printed to the worker's log) unless an SMTP host is named.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "paddlecloud@localhost")
# Webhooks go to public addresses only unless this is true (a portal on a private network).
PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = env_bool("PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE", False)
# One deadline for each POST, from connect to the end of the answer (notifications/webhook.py).
PADDLECLOUD_WEBHOOK_TIMEOUT = env_int("PADDLECLOUD_WEBHOOK_TIMEOUT", 10, minimum=1)

# --- REST framework ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["core.api.renderers.JSONRenderer"],  # lone surrogates escaped, not a 500
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.ErrorDocumentingSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "PaddleCloud API",
    "DESCRIPTION": "Submit and follow PaddlePaddle training jobs; manage files, registries and quota.",
    "VERSION": "v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Without deep links an operation's path is text, not a link inside its row's toggle button: a link in
    # a button is "nested-interactive" to screen readers (axe, serious). The address bar then keeps no anchor.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
}

# --- Celery -----------------------------------------------------------------------------------
_broker_url = env_secret("CELERY_BROKER_URL")
CELERY_BROKER_URL = _broker_url or "pcfs://"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("pcfs://"):  # unset, or named explicitly
    # The embedded broker (core/broker.py): a folder of message files, no server. Its consumers are woken
    # by inotify and by their own acks; taken messages wait in `<broker>/.claims/` until acked.
    _broker_dir = VAR_DIR / "celery" / "broker"
    _control = VAR_DIR / "celery" / "control"  # kombu's default is ./control in the cwd
    for _d in (_broker_dir, _control):
        _d.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "control_folder": str(_control),
        "polling_interval": 1.0,  # seconds: only the safety net (and the poll where there is no inotify)
    }
CELERY_TASK_IGNORE_RESULT = True
# Control loops, per-job work, side work and notifications each have a queue and worker slots of
# their own, so none waits behind another's backlog (core/lanes.py).
CELERY_TASK_ROUTES = ["core.lanes.route"]
# Messages are JSON only: a message someone else put on the broker is never unpickled.
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message for the next one
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celery" / "beat-schedule")
CELERY_HEARTBEAT_SECONDS = env_int("PADDLECLOUD_HEARTBEAT_SECONDS", 30, minimum=1)

# --- Logging ----------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL: {LOG_LEVEL!r} is not one of DEBUG, INFO, WARNING, ERROR")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # SQL at DEBUG would print encrypted columns and token hashes: keep it at INFO.
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "heartbeat": {"task": "portal.heartbeat", "schedule": float(CELERY_HEARTBEAT_SECONDS), "options": {"expires": 60}},
    # The safety net of experiments: a trial's end advances its experiment at once (experiments.tasks); this
    # catches an advance whose message was lost.
    "experiments-advance": {"task": "experiments.advance_all", "schedule": 15.0, "options": {"expires": 15}},
}

# --- Storage uploads (storage/conf.py checks the chunk sizes are 64 KiB-aligned) ---------------
PADDLECLOUD_UPLOAD_CHUNK = env_int("PADDLECLOUD_UPLOAD_CHUNK", 8 * 1024**2, minimum=64 * 1024)  # bytes, the default
PADDLECLOUD_UPLOAD_MAX_CHUNK = env_int("PADDLECLOUD_UPLOAD_MAX_CHUNK", 64 * 1024**2, minimum=64 * 1024)  # bytes
PADDLECLOUD_UPLOAD_EXPIRE_SECONDS = env_int("PADDLECLOUD_UPLOAD_EXPIRE_SECONDS", 24 * 3600, minimum=60)
PADDLECLOUD_UPLOAD_VERIFY_INLINE = env_int("PADDLECLOUD_UPLOAD_VERIFY_INLINE", 4 * 1024**3, minimum=0)  # bytes

# --- Jobs -------------------------------------------------------------------------------------
PADDLECLOUD_RECONCILE_SECONDS = env_int("PADDLECLOUD_RECONCILE_SECONDS", 2, minimum=1)
# The control worker watches Kubernetes datacenters instead of listing them every cycle
# (jobs/engines/kubernetes/watch.py); off, every cycle lists (3 calls per datacenter) as before.
PADDLECLOUD_K8S_WATCH = env_bool("PADDLECLOUD_K8S_WATCH", True)
# Requests that may wait for a job's change at once, per web process (jobs/api/waiting.py); each costs a
# greenlet and a query every 0.1 s (portal/gunicorn_conf.py: 1,000 connections per process).
PADDLECLOUD_LONG_POLL_SLOTS = env_int("PADDLECLOUD_LONG_POLL_SLOTS", 100, minimum=0)
# Downloads (files, whole worker logs) one user may have going at once on one web host (core/streams.py);
# one more is a 429 with Retry-After.
PADDLECLOUD_DOWNLOADS_PER_USER = env_int("PADDLECLOUD_DOWNLOADS_PER_USER", 8, minimum=1)
PADDLECLOUD_KILL_GRACE_SECONDS = env_int("PADDLECLOUD_KILL_GRACE_SECONDS", 10, minimum=0)
# PS mode: seconds the trainers' gloo rendezvous may take from the first trainer's arrival before each
# trainer's launcher fails it (RendezvousTimeout; paddlecloud.runtime.rendezvous). Paddle's own: an hour.
PADDLECLOUD_RENDEZVOUS_TIMEOUT = env_int("PADDLECLOUD_RENDEZVOUS_TIMEOUT", 300, minimum=1)
# Where the launcher caches job virtualenvs (shared by jobs with the same requirements.txt);
# empty: the launcher's default, ~/.cache/paddlecloud/venvs.
PADDLECLOUD_VENV_CACHE = env_str("PADDLECLOUD_VENV_CACHE", "")
# This portal installation on its host, a name generated once into VAR_DIR (kept with it when it moves): two
# portals on one host with default settings get job uids and layer caches of their own (jobs.engines.local). A
# var folder that ran local jobs before it had one is `legacy`: its jobs' uids stay what they were. No secret: the
# file is 0644, read by the web tier and the workers alike, whichever user made it.
PADDLECLOUD_SITE = env_str("PADDLECLOUD_SITE", "") or generated_secret(
    VAR_DIR / "site-id", lambda: "legacy" if (VAR_DIR / "local-engine").exists() else secrets.token_hex(6), 0o644
)
# Local jobs of portal user N run as uid and gid BASE + N (jobs.engines.local.world.job_ids): one
# unprivileged uid per user, above the ranges useradd gives accounts and subordinate ids (<= 600100000).
# Default: 1,000,000,000 + 2**20 x this site's slot of 1,024 (0 for `legacy`), so each site has 2**20 users'
# uids below 2**31; several portals on one host are apart unless two draw one slot (1 in 1,024): set it apart
# by hand to be sure.
PADDLECLOUD_JOB_UID_BASE = env_int(
    "PADDLECLOUD_JOB_UID_BASE", 1_000_000_000 + site_slot(PADDLECLOUD_SITE) * 2**20, minimum=1000
)
# The uid/gid job pods run as (the `paddle` user of deploy/Dockerfile); a root worker hands the job's
# folders on the PFS to it, as it does to each user's job uid for local jobs.
PADDLECLOUD_POD_UID = env_int("PADDLECLOUD_POD_UID", 1000, minimum=1)
PADDLECLOUD_POD_GID = env_int("PADDLECLOUD_POD_GID", 1000, minimum=1)
CELERY_BEAT_SCHEDULE.update(
    {
        "reconcile": {
            "task": "jobs.reconcile",
            "schedule": float(PADDLECLOUD_RECONCILE_SECONDS),
            "options": {"expires": 2 * PADDLECLOUD_RECONCILE_SECONDS},
        },
        # The scheduler's safety net: submits and releases wake it at once (jobs/scheduling/cycle.py).
        "schedule": {
            "task": "jobs.schedule",
            "schedule": float(PADDLECLOUD_RECONCILE_SECONDS),
            "options": {"expires": 2 * PADDLECLOUD_RECONCILE_SECONDS},
        },
        # Running workers' CPU and memory, each job every 10 s at most (jobs/follow/worker_usage.py).
        "usage-samples": {
            "task": "jobs.sample_usage",
            "schedule": float(PADDLECLOUD_RECONCILE_SECONDS),
            "options": {"expires": 2 * PADDLECLOUD_RECONCILE_SECONDS},
        },
        "cleanup": {"task": "jobs.cleanup", "schedule": 60.0, "options": {"expires": 60}},
        # What each user stores, hourly: the accounting's storage GiB-days (jobs/scheduling/accounting.py).
        "storage-samples": {"task": "storage.sample_usage", "schedule": 3600.0, "options": {"expires": 600}},
        # Homes of users with started jobs, each measured at most every 5 s (jobs/follow/reconcile.py).
        "storage-quota": {"task": "jobs.storage_quota", "schedule": 3.0, "options": {"expires": 6}},
        # In-cluster image builds follow the same tick as jobs (images/tasks.py).
        "poll-builds": {
            "task": "images.poll_builds",
            "schedule": float(PADDLECLOUD_RECONCILE_SECONDS),
            "options": {"expires": 2 * PADDLECLOUD_RECONCILE_SECONDS},
        },
        "storage-cleanup-uploads": {"task": "storage.cleanup_uploads", "schedule": 3600.0, "options": {"expires": 600}},
    }
)
