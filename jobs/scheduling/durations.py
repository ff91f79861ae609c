"""How long jobs run, as the forecast (jobs.scheduling.replay) needs it: a running job's expected end, and a
waiting job's expected duration, each with how it is known.

The surest source first: **progress** (the job's own steps per second, jobs.follow.progress: the ETA its trainers
give; a preempted or restarted job's too, from where it stopped), then **history** (the median wall time of the
last HISTORY_RUNS succeeded runs of the same name by the same user, a trailing run number aside (`resnet-3` is a
run of `resnet`), or of the same experiment's trials), then the
**average** wall time of the datacenter's last AVERAGE_RUNS finished jobs; else unknown. A stalled job's ETA is
no measure (jobs.follow.progress clears it), so a stalled job falls to history. A job that already ran past its
history is expected to end any moment, not in the past.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from datacenters.models import Datacenter
from jobs.models import SPEC_EXPERIMENT, Job, JobState
from jobs.scheduling.replay import AVERAGE, HISTORY, PROGRESS, Expected

HISTORY_RUNS = 5  # runs of one name (or experiment) whose median is its expected wall time
AVERAGE_RUNS = 50  # the datacenter's finished jobs whose average is the last resort
MAX_HISTORY_ROWS = 5000  # finished jobs one forecast reads for history, newest first
FIELDS = ("id", "owner_id", "name", "spec", "started_at", "progress", "stalled_at")  # what `Durations` reads of a job

Key = tuple[Any, ...]
UNKNOWN = Expected(None, None)


RUN_NUMBER = re.compile(r"-\d+$")


def _key(job: Mapping[str, Any]) -> Key:
    experiment = (job.get("spec") or {}).get(SPEC_EXPERIMENT)
    return ("experiment", experiment) if experiment else ("name", job["owner_id"], RUN_NUMBER.sub("", job["name"]))


def _wall(started: datetime | None, finished: datetime | None) -> float | None:
    return None if started is None or finished is None else max((finished - started).total_seconds(), 0.0)


class Durations:
    """The expected durations of a set of jobs (rows of FIELDS), read in three queries however many they are."""

    def __init__(self, datacenter: Datacenter, jobs: Iterable[Mapping[str, Any]]) -> None:
        self.jobs = list(jobs)
        self.history = self._history(datacenter)
        recent = Job.objects.filter(datacenter=datacenter, started_at__isnull=False, finished_at__isnull=False)
        walls = [_wall(s, f) for s, f in recent.order_by("-finished_at").values_list("started_at", "finished_at")[
            :AVERAGE_RUNS]]  # fmt: skip
        known = [w for w in walls if w is not None]
        self.average = sum(known) / len(known) if known else None

    def _history(self, datacenter: Datacenter) -> dict[Key, float]:
        keys = {_key(job) for job in self.jobs}
        owners = {k[1] for k in keys if k[0] == "name"}
        experiments = {k[1] for k in keys if k[0] == "experiment"}
        done = Job.objects.filter(
            datacenter=datacenter, state=JobState.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False
        ).order_by("-finished_at")
        runs: dict[Key, list[float]] = defaultdict(list)
        columns = ("owner_id", "name", "spec", "started_at", "finished_at")
        found = []
        if owners:  # by owner, newest first: a name's runs are told apart here (their run numbers aside)
            found += list(done.filter(owner_id__in=owners).values(*columns)[:MAX_HISTORY_ROWS])
        if experiments:
            found += list(done.filter(**{f"spec__{SPEC_EXPERIMENT}__in": experiments}).values(*columns)[
                :MAX_HISTORY_ROWS])  # fmt: skip
        for row in found:
            key = _key(row)
            wall = _wall(row["started_at"], row["finished_at"])
            if key in keys and wall is not None and len(runs[key]) < HISTORY_RUNS:
                runs[key].append(wall)
        return {key: statistics.median(walls) for key, walls in runs.items()}

    def whole(self, job: Mapping[str, Any]) -> Expected:
        """How long the job runs from its start: progress's remaining time where it has one, else history, else
        the average."""
        eta = (job.get("progress") or {}).get("eta_seconds")
        if eta is not None and job.get("stalled_at") is None:
            return Expected(float(eta), PROGRESS)
        if (seconds := self.history.get(_key(job))) is not None:
            return Expected(seconds, HISTORY)
        return Expected(self.average, AVERAGE) if self.average is not None else UNKNOWN

    def end(self, job: Mapping[str, Any], now: datetime) -> tuple[float | None, str | None]:
        """A running job's expected end (epoch seconds) and its basis: now + the ETA where progress gives one, else
        its start + its expected wall time, and never before now."""
        expected = self.whole(job)
        if expected.seconds is None:
            return None, None
        began = now if expected.basis == PROGRESS else (job.get("started_at") or now)
        return max(began.timestamp() + expected.seconds, now.timestamp()), expected.basis
