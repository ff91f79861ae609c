"""A worker's metrics.jsonl read by cursor: the lines paddlecloud.metrics.log wrote, checked again here.

The file lies in the job's output folder, which the job itself can write anything into, so every
line is parsed with the client's own rules (name, finite number, step) and a line that breaks one is
skipped and counted, never passed on.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.core.cache import cache
from paddlecloud.contract.layout import METRICS_NAME
from paddlecloud.contract.metricline import MAX_VALUES, valid_name, valid_step, valid_total, valid_value

from jobs.errors import LogRefused
from jobs.files import logfiles
from jobs.follow import logs
from jobs.models import TERMINAL_STATES, Job
from storage.backends import StorageUnavailable

MAX_LINE = 8 * 1024  # a valid line is far shorter (32 values of 64-character names)
CURVE_CACHE_SECONDS = 3600  # a released job's curve, as the experiment and compare pages draw it


# NaN/Infinity -> None -> refused below. One decoder for every line: json.loads with an option builds a new one each
# call, a third of the time of a curve's first read.
_DECODER = json.JSONDecoder(parse_constant=lambda _: None)


def parse_line(line: str) -> dict[str, Any] | None:
    """One point {"step", "time", "values"} (and "total_steps" if the line has one), or None when the line is
    not one paddlecloud.metrics writes."""
    if len(line) > MAX_LINE:
        return None
    try:
        data = _DECODER.decode(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not valid_step(data.get("step")):
        return None
    total = data.get("total_steps")
    if total is not None and not valid_total(total):
        return None  # a total of 0 or less (or not a whole number) is refused with its line, as a bad value is
    values = data.get("values")
    least = 0 if total is not None else 1  # a line may carry progress alone
    if not isinstance(values, dict) or not least <= len(values) <= MAX_VALUES:
        return None
    if not all(valid_name(k) and valid_value(v) for k, v in values.items()):
        return None
    when = data.get("time")
    point = {"step": data["step"], "time": when if valid_value(when) else None, "values": values}
    if total is not None:
        point["total_steps"] = total
    return point


def _curve_point(line: bytes, name: str) -> list[float] | None:
    """[step, value of `name`] of one line; only what is passed on is checked (the step and that value), by the
    client's rules as parse_line checks them: half its time, for the pages that draw many curves."""
    if len(line) > MAX_LINE:
        return None
    try:
        data = _DECODER.decode(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, dict) or not valid_step(data.get("step")) or not valid_value(value := values.get(name)):
        return None
    return [data["step"], value]


def read_points(job: Job, worker: str, cursor: str, limit: int = logfiles.MAX_CHUNK) -> dict[str, Any]:
    """Points after `cursor` (whole lines, at most `limit` bytes of the file), the next cursor, and whether done."""
    offset = logfiles.parse_cursor(cursor)
    final = job.state in TERMINAL_STATES and job.released  # no process of the job writes any more
    handle = logs.open_file(job, worker, METRICS_NAME)  # beneath the root, no link followed, as logs are
    if handle is None:
        return {"points": [], "skipped": 0, "cursor": str(offset), "complete": final}
    with handle:
        size = handle.seek(0, 2)
        offset = min(offset, size)
        handle.seek(offset)
        data = handle.read(limit)
    whole = data[: data.rfind(b"\n") + 1]
    if final and offset + len(data) >= size:
        whole = data  # the writer is gone: a last line without its newline is all there will be
    elif not whole and len(data) == limit:
        # No newline in `limit` bytes: not a line paddlecloud.metrics writes; step over it.
        return {"points": [], "skipped": 1, "cursor": str(offset + limit), "complete": False}
    points, skipped = [], 0
    for line in whole.decode("utf-8", errors="replace").splitlines():
        point = parse_line(line) if line.strip() else None
        if point is not None:
            points.append(point)
        elif line.strip():
            skipped += 1
    end = offset + len(whole)
    return {"points": points, "skipped": skipped, "cursor": str(end), "complete": final and end >= size}


def last_points(job: Job, worker: str, count: int, tail_bytes: int) -> list[dict[str, Any]]:
    """The worker's last `count` points, read from the last `tail_bytes` of its file (for pages without JS)."""
    try:
        handle = logs.open_file(job, worker, METRICS_NAME)
    except LogRefused:
        return []  # the metrics API answers why (403); a page without JavaScript just shows none
    if handle is None:
        return []
    with handle:
        size = handle.seek(0, 2)
    # From a whole number of lines before the end: a cut first line is skipped as the API skips bad lines.
    answer = read_points(job, worker, str(max(0, size - tail_bytes)), tail_bytes)
    points: list[dict[str, Any]] = answer["points"][-count:]
    return points


def curve(job: Job, name: str, max_bytes: int, max_points: int, worker: str = "trainer-0") -> list[list[float]]:
    """[step, value] of metric `name` as `worker` logged it, thinned evenly to at most `max_points` lines (the last
    kept): from the start of its file up to `max_bytes` (a bound on the work one page may ask for), and only the
    lines drawn are parsed. A job that ended and was released writes no more, so its curve is cached."""
    final = job.state in TERMINAL_STATES and job.released
    key = f"curve:{job.uid}:{worker}:{name}:{max_bytes}:{max_points}"
    if final and (cached := cache.get(key)) is not None:
        return cast(list[list[float]], cached)
    try:
        handle = logs.open_file(job, worker, METRICS_NAME)
    except (LogRefused, StorageUnavailable, OSError):  # refused or out of reach: the page shows no curve
        return []
    if handle is None:
        return []
    with handle:
        data = handle.read(max_bytes)
    lines = data.splitlines() if final else data[: data.rfind(b"\n") + 1].splitlines()
    every = max(len(lines) / max_points, 1.0)
    picked = {int(i * every) for i in range(min(max_points, len(lines)))} | ({len(lines) - 1} if lines else set())
    found = []
    for index in sorted(picked):
        point = _curve_point(lines[index], name)
        if point is not None:
            found.append(point)
    if final:
        cache.set(key, found, CURVE_CACHE_SECONDS)
    return found
