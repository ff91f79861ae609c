"""What the server, the job's processes and the page knew about a job, as text for a test's failure message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
from paddlecloud.contract.layout import METRICS_NAME as METRICS_FILE

from jobs.files import logfiles
from jobs.models import Job

LOG_LINES = 20
TAIL_BYTES = 16 * 1024  # enough for 20 lines of a training log

# The page's own view: the live area's state and the metrics section's polling (see static/js/metrics.js).
PAGE_VIEW = """() => {
  const metrics = document.getElementById('metrics');
  const state = document.getElementById('job-state');
  const log = document.getElementById('log');
  return {
    now: Date.now(),
    state: state ? state.textContent.trim() : null,
    workerRows: document.querySelectorAll('[data-testid=worker-row]').length,
    metrics: metrics ? {...metrics.dataset} : null,
    charts: Array.from(document.querySelectorAll('figure[data-metric]')).map(f => Array.from(f.attributes)
      .filter(a => a.name.startsWith('data-points-'))
      .map(a => `${f.dataset.metric}/${a.name.slice(12)}: ${a.value} points`)),
    logStatus: (document.getElementById('log-status') || {}).textContent || null,
    logTail: log ? log.textContent.slice(-1000) : null,
  };
}"""


def _tail(job: Job, worker: str) -> str:
    handle = logfiles.open_log(job, worker)
    if handle is None:
        return "    (no log.txt)"
    with handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - TAIL_BYTES))
        lines = handle.read().decode("utf-8", errors="replace").splitlines()[-LOG_LINES:]
    return "\n".join(f"    | {line}" for line in lines) or "    (log.txt is empty)"


def _metrics_lines(job: Job, worker: str) -> str:
    handle = logfiles.open_log(job, worker, METRICS_FILE)
    if handle is None:
        return f"no {METRICS_FILE}"
    lines = size = 0
    with handle:
        for chunk in iter(lambda: handle.read(64 * 1024), b""):
            lines, size = lines + chunk.count(b"\n"), size + len(chunk)
    return f"{METRICS_FILE}: {lines} lines, {size} bytes"


def _wchan(pid: int) -> str:
    """Where in the kernel the process waits (psutil does not read it)."""
    try:
        return (Path("/proc") / str(pid) / "wchan").read_text(errors="replace") or "-"
    except OSError:
        return "-"


def processes(pid: int | None) -> list[str]:
    """The worker's process tree with each process's state and where in the kernel it waits (a hang shows there)."""
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]  # the launcher, its shell, the entry
    except psutil.Error:
        return [f"    process {pid}: gone"]
    out = []
    for each in tree:
        try:
            command = " ".join(each.cmdline())[:120]
            out.append(f"    process {each.pid}: state={each.status()} wchan={_wchan(each.pid)} {command}")
        except psutil.Error:
            out.append(f"    process {each.pid}: gone")
    return out


def server_view(uid: str) -> str:
    """The job's state and message, and each worker's row, log tail and metrics file, from the database and disk."""
    job = Job.objects.filter(uid=uid).first()
    if job is None:
        return f"job {uid}: not in the database"
    out = [
        f"job {uid}: state={job.state} reason={job.reason!r} exit_code={job.exit_code} released={job.released}",
        f"  message: {job.message!r}",
    ]
    names = set(job.worker_names)
    for row in job.workers.order_by("role", "index"):
        names.discard(row.name)
        out.append(f"  {row.name}: state={row.state} exit_code={row.exit_code} pid={row.pid} "
                   f"restarts={row.restarts} message={row.message!r}")
        out.extend(processes(row.pid))
        out.extend(_files(job, row.name))
    for name in sorted(names):
        out.append(f"  {name}: no worker row")
        out.extend(_files(job, name))
    return "\n".join(out)


def _files(job: Job, worker: str) -> list[str]:
    try:
        return [f"    {_metrics_lines(job, worker)}", f"    last {LOG_LINES} lines of log.txt:", _tail(job, worker)]
    except Exception as exc:  # a diagnosis must never hide the failure it describes
        return [f"    files not read: {exc!r}"]


def page_view(page: Any) -> str:
    """The page's own view of the job (a page that does not answer is said so)."""
    try:
        return f"page: {page.evaluate(PAGE_VIEW)}"
    except Exception as exc:  # the page may be gone or hung: say so, keep the server's view
        return f"page: not read ({exc!r})"


def describe(uid: str, page: Any, worker_log: str = "") -> str:
    """Everything known about the job: the server's records and files, the page, the Celery worker's log tail."""
    parts = [server_view(uid), page_view(page)]
    if worker_log:
        parts.append("celery worker log (last 40 lines):\n" + "\n".join(worker_log.splitlines()[-40:]))
    return "\n".join(parts)
