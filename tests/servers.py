"""Serve the portal under a real gunicorn for a test (as `make run` and production do), in its own process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from tests import workers
from tests.wait import WatchedProcess, wait_for


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def portal(log_dir: Path, *, processes: int | str = 1, settings: str = "tests.settings", **env: str) -> Iterator[str]:
    """The portal's base URL under gunicorn with the portal's own config (portal/gunicorn_conf.py: gevent
    workers, `processes` of them), Django settings module `settings`, on the test database unless `env` says
    otherwise; stopped when the block ends."""
    port = closed_port()
    full = {**os.environ, "DATABASE_URL": workers.test_database_url(), "DJANGO_SETTINGS_MODULE": settings, **env}
    log = log_dir / f"gunicorn-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "portal.wsgi", "--config", "python:portal.gunicorn_conf",
             "--bind", f"127.0.0.1:{port}", "--workers", str(processes)],
            cwd=workers.ROOT, env=full, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        # Any failure (refused, reset, timed out while the worker boots, a 5xx) means "not yet".
        try:
            return requests.get(f"{url}/api/v1/version", timeout=2).status_code < 500
        except requests.RequestException:
            return False

    try:
        wait_for(ready, "gunicorn to answer", 60, watch=WatchedProcess("gunicorn", process, log))
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
