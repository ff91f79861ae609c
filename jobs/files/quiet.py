"""Which rank went quiet first: when a collective job fails in a cascade (one rank hangs, its peers time out
waiting for it and abort), the rank that failed first by exit is not the one to blame. Each trainer's last line
of its own output (not the launcher's, not the portal's) and when it arrived (its log.times) tell: the trainer
whose last line is older than every other's by QUIET_GAP seconds or more stopped making progress first.

Reads the end of each of the first MAX_TRAINERS trainers' logs on the owner's storage (the same files for both
engines), beneath the home with no link followed; the job writes those files, so a time it forged is ignored as
logtimes ignores it, and a line is quoted cleaned and bounded as errorline quotes one.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from paddlecloud.contract import logtimes
from paddlecloud.contract.states import worker_name

from jobs.files import errorline, logfiles
from jobs.models import Job, Role

QUIET_GAP = 10.0  # seconds: a trainer this much quieter than all the others is named
MAX_TRAINERS = 16  # trainers looked at: a bounded cost whatever the job's size
_OWN_PREFIXES = ("[paddlecloud-launch] ", "[paddlecloud] ", "=== attempt started ")


def last_own_line(job: Job, worker: str) -> tuple[float, str] | None:
    """(arrival time, the line) of the last line the worker's own program wrote, from its log's tail; None where
    the log, its times or such a line is missing."""
    try:
        fd = logfiles.open_log_fd(job, worker, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as log:
        start = max(0, os.fstat(log.fileno()).st_size - errorline.TAIL_BYTES)
        log.seek(start)
        data = log.read(errorline.TAIL_BYTES)
    starts = logtimes.line_starts(data, start)
    lines = data.split(b"\n")
    for offset, raw in zip(reversed(starts), reversed(lines[: len(starts)]), strict=False):
        text = raw.decode("utf-8", "replace")
        if text.strip() and not text.startswith(_OWN_PREFIXES):
            times = logfiles.open_times(job, worker)
            try:
                when = logtimes.times_at(times, [offset])[0]
            finally:
                if times is not None:
                    times.close()
            return (when, errorline.clean(text)) if when is not None else None
    return None


def quiet_first(job: Job) -> str:
    """A collective job's trainer that went quiet QUIET_GAP seconds before all the others, said in a sentence for
    its failure message; "" where none did (or the job has pservers: their trainers do not wait on each other)."""
    if job.pservers or job.trainers < 2:
        return ""
    seen = {}
    for index in range(min(job.trainers, MAX_TRAINERS)):
        found = last_own_line(job, worker_name(Role.TRAINER, index))
        if found is not None:
            seen[index] = found
    if len(seen) < 2:
        return ""
    ordered = sorted(seen.items(), key=lambda item: item[1][0])
    (index, (when, line)), (_, (next_when, _)) = ordered[0], ordered[1]
    if next_when - when < QUIET_GAP:
        return ""
    at = datetime.fromtimestamp(when, tz=UTC).strftime("%H:%M:%S UTC")
    return (
        f"trainer {index} went quiet first: its last line came at {at}, {next_when - when:.0f} s before any other "
        f"trainer's ({line})"
    )
