"""Which checkpoints of a run a keep policy keeps, and the rules of a policy: one rule for the job's own
paddlecloud.checkpoint.save, the portal's pruning of an ended job (spec `keep`) or trial (the sweep's `keep`),
and paddlectl, the SDK and the API that check a policy before anything is made.

A policy is `{best: N, latest: M, goal: minimize|maximize}`: the latest M checkpoints by step and the best N by
the metric each was saved with (`save(..., metric=)`), lower first under `minimize`. A key left out takes its
default (the best 1, the latest 1, minimize). Where a policy would keep none of the checkpoints found (the best of
checkpoints saved without a metric), the latest stays: a policy never removes a run's last checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GOALS = ("minimize", "maximize")
DEFAULT_BEST, DEFAULT_LATEST = 1, 1
MAX_KEPT = 1000  # of either kind; more is "all" in practice
SHAPE = "must be {best: N, latest: M, goal: minimize|maximize}: how many checkpoints stay, and which are best"


def kept_steps(found: Iterable[tuple[int, float | None]], best: int, latest: int, goal: str = "minimize") -> set[int]:
    """The steps kept among `found`, (step, the metric it was saved with or None): the latest `latest` by step and
    the best `best` by metric under `goal` (of two alike, the later); the latest one where that would be none."""
    found = list(found)
    steps = sorted(step for step, _ in found)
    kept = set(steps[-latest:]) if latest > 0 else set()
    sign = 1.0 if goal == "minimize" else -1.0
    scored = sorted((sign * value, -step) for step, value in found if value is not None)
    kept |= {-negative_step for _, negative_step in scored[: max(best, 0)]}
    if not kept and steps:
        kept.add(steps[-1])
    return kept


def policy_problem(value: object, *, with_goal: bool = True) -> tuple[str, str] | None:
    """(the field, e.g. `keep.best`, and its problem) of a policy, or None; `with_goal`: the policy may name its
    goal (a job's; an experiment's goal is its metric's)."""
    allowed = {"best", "latest", "goal"} if with_goal else {"best", "latest"}
    if not isinstance(value, Mapping) or not set(value) <= allowed or not all(isinstance(k, str) for k in value):
        shape = SHAPE if with_goal else "must be {best: N, latest: M}: how many checkpoints of each trial stay"
        return "keep", shape
    for key in ("best", "latest"):
        count = value.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_KEPT:
            return f"keep.{key}", f"must be an integer from 0 to {MAX_KEPT}"
    if value.get("goal", "minimize") not in GOALS:
        return "keep.goal", f"must be one of {', '.join(GOALS)}"
    if value.get("best", DEFAULT_BEST) == 0 and value.get("latest", DEFAULT_LATEST) == 0:
        return "keep", "must keep at least one checkpoint: best >= 1 or latest >= 1"
    return None


def policy(value: Mapping[str, Any]) -> tuple[int, int, str]:
    """(best, latest, goal) of a policy policy_problem passed, the defaults filled in."""
    return int(value.get("best", DEFAULT_BEST)), int(value.get("latest", DEFAULT_LATEST)), value.get("goal", GOALS[0])


def parse_flag(text: str) -> dict[str, int | str]:
    """paddlectl's `-keep latest=2,best=1,goal=maximize` as a policy (checked by policy_problem after); ValueError
    naming the part that is not KEY=VALUE."""
    chosen: dict[str, int | str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{part!r} must be KEY=VALUE (best=N, latest=M, goal=minimize|maximize)")
        key, raw = key.strip(), raw.strip()
        chosen[key] = raw if key == "goal" or not raw.lstrip("-").isdigit() else int(raw)
    return chosen
