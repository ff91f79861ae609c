"""Test settings: the portal's settings with per-run files, so parallel test runs never share state."""

import os

from portal.settings import *  # noqa: F403
from portal.settings import DATABASES, VAR_DIR

# Set in the environment, so Celery workers started by the tests join this run (same queue).
_run = os.environ.setdefault("PADDLECLOUD_TEST_RUN", f"test-{os.getpid()}")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"{_run}.sqlite3")}
else:
    # PostgreSQL: one database per run too, so two runs on one server do not drop each other's.
    DATABASES["default"]["TEST"] = {"NAME": f"test_paddlecloud_{os.getpid()}"}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / "cache" / _run),
    }
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only; never in production

# Every task of this run goes to its own queue: a `make run` worker on the same broker never takes it.
CELERY_TASK_DEFAULT_QUEUE = f"paddlecloud-{_run}"
