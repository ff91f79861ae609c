"""Training metrics as JSON lines: ``paddlecloud.metrics.log(step=10, loss=0.25)``, cheap enough for every step.

Inside a job each process appends to ``<PADDLECLOUD_OUTPUT_DIR>/<role>_<index>/metrics.jsonl`` (next to its
``log.txt``), where the portal reads it (``GET /api/v1/jobs/<name>/metrics``, ``paddlectl metrics``, the
loss curve on the job page). Outside a job the file is ``$PADDLECLOUD_METRICS_FILE`` if set, else
``./metrics.jsonl``.

One line per call: ``{"step": 10, "time": 1712345678.123, "values": {"loss": 0.25}}``. With
``total_steps=N`` the line also carries ``"total_steps": N`` and the portal shows the job's progress and ETA
(``log(step=i, total_steps=N)`` alone is enough). Lines are kept in
memory and written by a background thread at least every second, and at exit. The call never raises
into training: a bad name or value is dropped with one warning on stderr, a write that fails (disk
full, folder gone) is reported once and the lines are dropped.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import numbers
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from paddlecloud.contract import layout
from paddlecloud.contract.metricline import MAX_NAME, MAX_VALUES, valid_name, valid_step, valid_total, valid_value

FILE_NAME = layout.METRICS_NAME  # in the worker folder, and ./metrics.jsonl outside a job
MAX_BUFFERED = 10_000  # lines held while the writer is behind; more are dropped (and said once)
FLUSH_SECONDS = 1.0


def default_path(env: dict[str, str] | None = None) -> Path:
    """Where this process's metrics go: its worker folder in a job, else PADDLECLOUD_METRICS_FILE or ./metrics.jsonl."""
    env = dict(os.environ) if env is None else env
    if env.get("PADDLECLOUD_METRICS_FILE"):
        return Path(env["PADDLECLOUD_METRICS_FILE"])
    names = ("PADDLECLOUD_OUTPUT_DIR", "PADDLECLOUD_ROLE", "PADDLECLOUD_INDEX")  # set by both engines
    output, role, index = (env.get(n, "").strip() for n in names)
    if output and role and index.isdigit():
        return Path(output) / layout.worker_folder(role, int(index)) / FILE_NAME  # the launcher's layout
    return Path(FILE_NAME)


class MetricsWriter:
    """Buffers metric lines and appends them to one file from a daemon thread."""

    def __init__(self, path: Path, flush_seconds: float = FLUSH_SECONDS) -> None:
        self.path = path
        self.flush_seconds = flush_seconds
        self._lines: list[str] = []
        self._lock = threading.Lock()  # the buffer; log() never waits for a write
        self._flushing = threading.Lock()  # one flush at a time, from taking the lines to writing them
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()
        self._pid = os.getpid()

    def log(self, step: Any, values: dict[str, Any], total_steps: Any = None) -> None:
        try:
            self._log(step, values, total_steps)
        except Exception as exc:  # never into training
            self._warn("internal", f"paddlecloud.metrics: a metric line was dropped: {exc!r}")

    def _log(self, step: Any, values: dict[str, Any], total_steps: Any = None) -> None:
        if not valid_step(step):
            self._warn("step", f"paddlecloud.metrics: step must be a whole number from 0 to 2**53, got {step!r}")
            return
        if total_steps is not None and not valid_total(total_steps):
            self._warn("total", f"paddlecloud.metrics: total_steps must be a whole number from 1 to 2**53, "
                       f"got {total_steps!r:.40}; dropped")
            total_steps = None
        kept = self._kept(values)
        if not kept and total_steps is None:
            return
        point: dict[str, Any] = {"step": int(step), "time": round(time.time(), 3), "values": kept}
        if total_steps is not None:
            point["total_steps"] = int(total_steps)
        self._append(json.dumps(point, allow_nan=False))

    def _kept(self, values: dict[str, Any]) -> dict[str, float | int]:
        """The values that keep the rules (metricline); each one dropped is said once."""
        kept: dict[str, float | int] = {}
        for name, value in list(values.items())[:MAX_VALUES]:
            if not valid_name(name):
                self._warn(f"name:{name!r:.80}", f"paddlecloud.metrics: {name!r:.80} is not a metric name "
                           f"(1 to {MAX_NAME} printable characters); dropped")
            elif not valid_value(value):
                message = f"paddlecloud.metrics: {name}={value!r:.40} is not a finite number; dropped"
                self._warn(f"value:{name}", message)
            else:
                kept[name] = int(value) if isinstance(value, numbers.Integral) else float(value)
        if len(values) > MAX_VALUES:
            self._warn("many", f"paddlecloud.metrics: at most {MAX_VALUES} metrics per call; the rest were dropped")
        return kept

    def _append(self, line: str) -> None:
        with self._lock:
            if os.getpid() != self._pid:  # a forked child: its own buffer and thread
                self._lines, self._thread, self._pid = [], None, os.getpid()
            if len(self._lines) >= MAX_BUFFERED:
                self._warn("full", "paddlecloud.metrics: the writer is behind; lines were dropped")
                return
            self._lines.append(line + "\n")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="paddlecloud-metrics", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Write what is buffered now (the thread does it every second; atexit does it last).

        One flush at a time, start to end: the thread is a daemon, killed as the interpreter ends, so
        atexit's flush waits for a write the thread has begun, or the lines it took would be lost (seen:
        a trainer whose thread first ran as training ended left an empty file)."""
        with self._flushing:
            self._write_buffered()

    def _write_buffered(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
        if not lines:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write("".join(lines))
        except OSError as exc:
            self._warn("write", f"paddlecloud.metrics: cannot write {self.path}: {exc}; metrics are dropped")

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned and len(self._warned) < 100:
            self._warned.add(key)
            with contextlib.suppress(OSError, ValueError):
                print(message, file=sys.stderr, flush=True)


_writer: MetricsWriter | None = None
_writer_lock = threading.Lock()


def writer() -> MetricsWriter:
    """The process's writer, made on first use (so PADDLECLOUD_* set before the first call count)."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = MetricsWriter(default_path())
            atexit.register(_writer.flush)
        return _writer


def log(step: int, total_steps: int | None = None, **values: float) -> None:
    """Record `values` (name=number) at training step `step`, and the run's `total_steps` if known; never raises."""
    with contextlib.suppress(Exception):  # metrics must never stop training
        writer().log(step, values, total_steps)


def flush() -> None:
    """Write buffered lines now (e.g. before a long evaluation)."""
    with contextlib.suppress(Exception):
        writer().flush()
