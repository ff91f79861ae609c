"""How paddlectl prints: kubectl-style tables, JSON/YAML for scripts, ages, sizes and progress bars.

Tables are plain aligned text (no borders, no wrapping), so they read well, pipe into awk, and are
the same on every terminal; only the header is bold, and only on a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from paddlecloud.contract.spec import param_text
from paddlecloud.contract.states import RUNNING, SUCCEEDED, TERMINAL_JOB_STATES
from paddlecloud.contract.units import parse_time
from paddlecloud.sdk.config import Datacenter

FORMATS = ("table", "json", "yaml")
MAX_CELL = 80


def now() -> datetime:
    """The current time (a seam: golden-output tests pin it)."""
    return datetime.now(UTC)


def human_duration(seconds: float) -> str:
    """kubectl's ages: 45s, 5m30s, 3h, 2d4h, 40d, 2y30d."""
    s = max(int(seconds), 0)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d"


def age(stamp: str | None) -> str:
    when = parse_time(stamp)
    return human_duration((now() - when).total_seconds()) if when else "-"


def metric_cell(value: object) -> str:
    """A metric's value in a table cell: 6 significant digits; "-" where there is none."""
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def human_bytes(count: float) -> str:
    """Binary units as Kubernetes writes them: 0, 512, 1.5Ki, 16Gi."""
    value = float(count)
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if abs(value) < 1024 or unit == "Pi":
            shown = round(value, 1)
            return f"{int(shown)}{unit}" if shown == int(shown) else f"{shown:.1f}{unit}"
        value /= 1024
    return str(count)


def number(value: float) -> str:
    return str(int(value)) if float(value) == int(value) else f"{value:g}"


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-" if value is None else ""
    text = " ".join(str(value).split())  # one line per row, whatever the message holds
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str | None = None) -> str:
    """Aligned columns separated by three spaces; the last column is not padded."""
    if not rows and empty is not None:
        return empty
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [v.ljust(widths[i]) if i < len(values) - 1 else v for i, v in enumerate(values)]
        return "   ".join(padded).rstrip()

    header = line(list(headers))
    if sys.stdout.isatty():
        header = click.style(header, bold=True)
    return "\n".join([header] + [line(r) for r in cells])


def dump(data: Any, fmt: str) -> str:
    if fmt == "yaml":
        import yaml  # noqa: PLC0415 - only for -o yaml: PyYAML costs every other command its start-up time

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False).rstrip("\n")
    return json.dumps(data, indent=2, ensure_ascii=False)


def emit(data: Any, fmt: str, render: Callable[[], str]) -> None:
    """Print `data` as JSON/YAML, or the table `render()` builds."""
    click.echo(dump(data, fmt) if fmt in ("json", "yaml") else render())


class BarProgress:
    """A rich progress bar on stderr (a terminal only); notes are printed either way."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None
        self._task: Any = None

    def start(self, total_bytes: int, files: int, verb: str) -> None:
        if not self.enabled:
            return
        # rich only when a bar is drawn (a terminal): importing it costs every other command ~50 ms.
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}", style="dim"),
            console=Console(file=sys.stderr),
            transient=False,
        )
        self._progress.start()
        label = f"{verb} {files} file{'s' if files != 1 else ''}"
        self._task = self._progress.add_task(label, total=total_bytes or None, current="")

    def file(self, name: str) -> None:
        if self._progress is not None:
            shown = name if len(name) <= 40 else "…" + name[-39:]
            self._progress.update(self._task, current=shown)

    def advance(self, count: int) -> None:
        if self._progress is not None and count:
            self._progress.advance(self._task, count)

    def note(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, current="")
            self._progress.stop()
            self._progress = None


# The tables of paddlectl's listings (get, ls, config view).


def _ready(counts: dict[str, Any], with_succeeded: bool) -> str:
    ready = int(counts.get(RUNNING, 0)) + (int(counts.get(SUCCEEDED, 0)) if with_succeeded else 0)
    return f"{ready}/{int(counts.get('total', 0))}"


def _pservers(job: dict[str, Any]) -> str:
    """Ready/total while the job lives; after its end, how many it had (pservers never "succeed": they are stopped)."""
    counts = job.get("pservers") or {}
    total = int(counts.get("total", 0))
    if not total:
        return "-"  # collective: no parameter servers
    return f"{total} ended" if job["state"] in TERMINAL_JOB_STATES else _ready(counts, False)


def params_text(params: object) -> str:
    """A job's params as `batch=64 lr=0.003` (by name; true/false as the CLI takes them); "" where it has none."""
    if not isinstance(params, dict):
        return ""
    return " ".join(f"{name}={param_text(value)}" for name, value in sorted(params.items()))


def jobs_table(items: list[dict[str, Any]], wide: bool = False) -> str:
    """One row per job; MESSAGE is the job's message (a failed one names its worker's last error line),
    cut at MAX_CELL characters: `-o json` has it whole. `wide` adds the job's PARAMS."""
    rows = [
        (j["name"], j["state"], _ready(j.get("trainers") or {}, True), _pservers(j), age(j.get("created_at")),
         progress_cell(j), *([params_text((j.get("spec") or {}).get("params")) or "-"] if wide else []),
         *_reason_and_message(j))
        for j in items
    ]  # fmt: skip
    headers = ("NAME", "STATE", "TRAINERS", "PSERVERS", "AGE", "PROGRESS", *(["PARAMS"] if wide else []), "REASON",
               "MESSAGE")  # fmt: skip
    return table(headers, rows, empty="No jobs.")


def progress_cell(job: dict[str, Any]) -> str:
    """`41% eta 3m10s` while it runs (`41% stalled` while it is Stalled), `done` once it succeeded, `-` for a job
    that logs no total_steps."""
    if job["state"] == SUCCEEDED:
        return "done"
    progress = job.get("progress")
    if not isinstance(progress, dict) or not isinstance(progress.get("fraction"), (int, float)):
        return "-"
    shown = f"{int(100 * min(1.0, max(0.0, float(progress['fraction']))))}%"  # floored: 99.9 % is not 100 %
    eta = progress.get("eta_seconds")
    stalled = any(w.get("reason") == "Stalled" for w in job.get("warnings") or [] if isinstance(w, dict))
    if job["state"] == RUNNING and stalled:
        shown += " stalled"  # no ETA: its steps stopped
    elif job["state"] == RUNNING and isinstance(eta, int):
        shown += f" eta {human_duration(eta)}"
    return shown


def _reason_and_message(job: dict[str, Any]) -> tuple[str, str]:
    """The job's reason and message; a running job with none shows its first warning (e.g. Stalled)."""
    warnings = job.get("warnings") or []
    if not job.get("reason") and warnings:
        return str(warnings[0].get("reason") or ""), str(warnings[0].get("message") or "")
    return job.get("reason") or "", job.get("message") or ""


def usage_cells(usage: dict[str, Any] | None) -> tuple[str, str]:
    """CPU (cores) and MEM (binary units) of a worker's live `usage`; blank when it does not run."""
    if not usage:
        return "", ""
    return f"{float(usage.get('cpu_cores') or 0):.2f}", human_bytes(int(usage.get("memory_bytes") or 0))


def workers_table(items: list[dict[str, Any]]) -> str:
    rows = [
        (w["name"], w["role"], w["state"], age(w.get("started_at")), w.get("restarts", 0),
         "" if w.get("exit_code") is None else w["exit_code"], *usage_cells(w.get("usage")), w.get("message") or "")
        for w in items
    ]
    return table(("NAME", "ROLE", "STATE", "START", "RESTARTS", "EXIT CODE", "CPU", "MEM", "MESSAGE"), rows,
                 empty="No workers yet.")


def builds_table(items: list[dict[str, Any]]) -> str:
    rows = [(b["uid"], b["state"], b.get("image", ""), b.get("datacenter", ""), age(b.get("created_at")),
             b.get("message") or "") for b in items]  # fmt: skip
    return table(("UID", "STATE", "IMAGE", "DATACENTER", "AGE", "MESSAGE"), rows, empty="No image builds.")


def registry_table(items: list[dict[str, Any]]) -> str:
    rows = [(r["name"], r.get("server", ""), r.get("username", ""), age(r.get("created_at"))) for r in items]
    return table(("NAME", "SERVER", "USERNAME", "AGE"), rows, empty="No registry secrets.")


QUOTA_ROWS = (
    ("cpu", "cpu", "number"),
    ("memory", "memory", "bytes"),
    ("gpu", "gpu", "number"),
    ("jobs", "running jobs", "number"),
    ("storage", "storage", "bytes"),
    ("storage_files", "storage files", "number"),
)


def quota_table(items: list[dict[str, Any]]) -> str:
    rows = []
    for report in items:
        limits, usage = report.get("limits", {}), report.get("usage", {})
        for key, label, kind in QUOTA_ROWS:
            limit, used = float(limits.get(key, 0)), float(usage.get(key, 0))
            show = human_bytes if kind == "bytes" else number
            rows.append((report["datacenter"], label, show(used), show(limit), show(max(limit - used, 0))))
    return table(("DATACENTER", "RESOURCE", "USED", "LIMIT", "FREE"), rows, empty="No datacenters.")


def datacenters_table(items: list[dict[str, Any]], current: str) -> str:
    rows = [("*" if d["name"] == current else "", d["name"], d.get("engine", ""), d.get("storage_kind", ""),
             d.get("description", "")) for d in items]
    return table(("CURRENT", "NAME", "ENGINE", "STORAGE", "DESCRIPTION"), rows, empty="No datacenters.")


def ls_table(items: list[dict[str, Any]], base: str) -> str:
    prefix = base.rstrip("/") + "/"
    rows = []
    for item in items:
        name = item["path"][len(prefix):] if item["path"].startswith(prefix) else item["name"]
        if item["kind"] == "dir":
            name += "/"
        size = "-" if item["kind"] == "dir" else human_bytes(int(item.get("size", 0)))
        rows.append((name, item["kind"], size, age(item.get("mtime"))))
    return table(("NAME", "KIND", "SIZE", "MODIFIED"), rows, empty="(empty)")


def config_table(datacenters: Sequence[Datacenter], current: str | None) -> str:
    rows = [
        ("*" if d.name == current else "", d.name, d.portal_name, d.endpoint, d.username,
         "yes" if d.password is not None else "no")
        for d in datacenters
    ]
    return table(("CURRENT", "NAME", "DATACENTER", "ENDPOINT", "USERNAME", "PASSWORD"), rows)
