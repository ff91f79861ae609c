"""ASHA's rule at one rung, pure (asynchronous successive halving, Li et al. 2020, as Ray Tune's ASHAScheduler
applies it): a trial that reaches a rung goes on only if its metric there is among the best 1/reduction of the
values every trial reported at that rung so far. Trials are never paused to wait for others, so the first ones at
a rung are compared with fewer; the best configuration is never stopped (it is never worse than the cutoff)."""

from __future__ import annotations

import math

from experiments.search import Metric


def cutoff(values: list[float], metric: Metric, reduction: int) -> float:
    """The worst value still among the best ceil(n / reduction) of `values` (not empty)."""
    ordered = sorted(values, reverse=metric.goal == "maximize")
    return ordered[math.ceil(len(ordered) / reduction) - 1]


def stops(value: float, values: list[float], metric: Metric, reduction: int) -> bool:
    """Whether a trial with `value` at a rung is stopped, `values` being every value reported there (its own too)."""
    return metric.better(cutoff(values, metric, reduction), value)
