"""A job's metrics through the API: every point a trainer logged with paddlecloud.metrics.log (read by cursor,
bounded), the last value of each metric per trainer, and the best and last value of one metric."""

from __future__ import annotations

import math
from typing import Any

from paddlecloud.contract.states import TRAINER
from paddlecloud.sdk.jobs import get, job_path, workers_of
from paddlecloud.sdk.session import Session, cursor_answers


def points(session: Session, name: str, worker: str = f"{TRAINER}-0") -> list[dict[str, Any]]:
    """Every point `worker` of the job `name` (a name or uid) logged so far: {"step", "time", "values"}, in order."""
    path = f"{job_path(name)}/metrics"
    found: list[dict[str, Any]] = []
    for answer in cursor_answers(lambda cursor: session.get(path, {"worker": worker, "cursor": cursor})):
        found.extend(answer.get("points", []))
    return found


def last_values(session: Session, name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The job, and per trainer its last step and the last value of each metric it logged."""
    job = get(session, name)
    found: dict[str, dict[str, Any]] = {}
    for worker in (w for w in workers_of(job) if w.startswith(f"{TRAINER}-")):
        logged = points(session, job["uid"], worker)
        if logged:
            values: dict[str, Any] = {}
            for point in logged:
                values.update(point["values"])
            found[worker] = {"step": logged[-1]["step"], "values": values}
    return job, found


def best_and_last(logged: list[dict[str, Any]], metric: str, goal: str = "minimize") -> dict[str, Any]:
    """{"best", "last", "step"} of `metric` in `logged` (None where it was never logged); best by `goal`."""
    values = [(p["step"], float(v)) for p in logged if isinstance(v := p["values"].get(metric), int | float)]
    values = [(step, v) for step, v in values if math.isfinite(v)]
    if not values:
        return {"best": None, "last": None, "step": None}
    pick = min if goal == "minimize" else max
    return {"best": pick(v for _, v in values), "last": values[-1][1], "step": values[-1][0]}
