"""Start a real Celery worker process for a test, on the configured broker and the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from core import lanes

ROOT = Path(__file__).resolve().parents[1]


def test_database_url() -> str:
    """The URL of the database pytest-django created, so the worker writes where the test reads."""
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    user = quote(s.get("USER") or "", safe="")
    password = quote(s.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgresql://{auth}{s.get('HOST') or 'localhost'}{port}/{s['NAME']}"


@dataclass
class WorkerProcess:
    """A worker consuming this test run's queues (see tests/settings.py); `queue` is the first of them."""

    queue: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def failure(self) -> str | None:
        """Why waiting on this worker is pointless (it exited), or None."""
        code = self.process.poll()
        return None if code is None else f"worker exited ({code})"


def start_worker(
    log_dir: Path,
    lanes_consumed: tuple[str, ...] = lanes.LANES,
    beat: bool = False,
    extra_env: dict[str, str] | None = None,
    concurrency: int = 1,
) -> WorkerProcess:
    """A worker on this run's queues of `lanes_consumed` (core/lanes.py; all of them unless told)."""
    queues = [lanes.queue(lane) for lane in lanes_consumed]
    queue = queues[0]
    env = {**os.environ, "DATABASE_URL": test_database_url(), "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    log_path = log_dir / f"worker-{queue}.log"
    args = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "portal",
        "worker",
        "-Q",
        ",".join(queues),
        "-c",
        str(concurrency),
        "--pool",
        "threads" if concurrency > 1 else "solo",
        "--without-gossip",
        "--without-mingle",
        "-n",
        f"{queue}@%h",
        "-l",
        "info",
    ]
    if beat:
        args += ["-B", "-s", str(log_dir / f"beat-{queue}")]
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return WorkerProcess(queue=queue, process=process, log_path=log_path)
