"""Test settings: the portal's settings with per-run files, so parallel test runs never share state."""

import os

from portal.settings import *  # noqa: F403
from portal.settings import DATABASES, VAR_DIR

# Set in the environment, so Celery workers started by the tests join this run (same queue). Each pytest-xdist
# worker is a run of its own: it inherits the controller's value, so its worker id is added to it (once: a Celery
# worker a test starts inherits the suffixed value and the same PYTEST_XDIST_WORKER).
_run = os.environ.get("PADDLECLOUD_TEST_RUN") or f"test-{os.getpid()}"
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker and not _run.endswith(f"-{_xdist_worker}"):
    _run = f"{_run}-{_xdist_worker}"
os.environ["PADDLECLOUD_TEST_RUN"] = _run
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
# SQLite's try-locks (core/locks.py) are files: one folder per run, so two xdist workers, each with its own database
# and so the same datacenter ids, never take each other's "schedule-1" (PostgreSQL's are per database already).
PADDLECLOUD_LOCK_DIR = VAR_DIR / "locks" / _run
# The local engine's process events (jobs/engines/local/events.py): one pipe per run, or one run's control worker
# reads (and drops) a line meant for another's job, which then waits for a periodic reconcile.
PADDLECLOUD_EVENTS_PIPE = VAR_DIR / "local-engine" / f"events-{_run}"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only; never in production

# Every task of this run goes to its own queue: a `make run` worker on the same broker never takes it.
CELERY_TASK_DEFAULT_QUEUE = f"paddlecloud-{_run}"
