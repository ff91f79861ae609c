"""A sweep, pure: its keys checked (each problem names its key), and the trials its search makes.

    name: lr-sweep                  # the experiment's name (a-z, 0-9, '-'; at most 34: trials are <name>-<index>)
    params:                         # each param: `values: [...]`, or `min`/`max` with `log` and `integer`
      lr: {min: 0.0001, max: 0.1, log: true}
      batch: {values: [32, 64]}
    search: grid | random | asha    # grid: every combination of `values`; random and asha: `max_trials` draws
    max_trials: 8                   # random, asha: how many; grid: at most this many of the combinations (default all)
    parallel: 2                     # most trials running at once (each is an ordinary job: quota, fair share apply)
    seed: 0
    metric: {name: loss, goal: minimize}   # what paddlecloud.metrics.log reports; the best trial is by it
    asha: {min_steps: 100, max_steps: 900, reduction: 3}   # asha only: its rungs, by the steps metrics.log reports
    keep: {best: 1, latest: 1}      # the checkpoints of each trial kept once it ended (the default); the rest go

`then` (a job spec, beside `template`) is a job submitted once the experiment succeeded, with the best trial's
params and its latest checkpoint to start from (experiments/services.py).

The same file makes the same trials: random and asha draws come from `seed` alone. Grid and random trials run to
their end; asha draws as random does and stops the trials that fall behind at each rung (experiments/asha.py).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from paddlecloud.contract import keeping
from paddlecloud.contract.keeping import GOALS
from paddlecloud.contract.metricline import valid_name
from paddlecloud.contract.spec import ParamValue, params_problem

MAX_TRIALS = 10_000
MAX_PARALLEL = 100  # the most trials of one experiment queued or running at once (a user's queue bound is 100)
MAX_NAME = 34  # "<name>-9999" is a 40-character job name
MAX_VALUES = 1000  # values of one param
KEYS = {"name", "params", "search", "max_trials", "parallel", "seed", "metric", "asha", "keep"}
SEARCHES = ("grid", "random", "asha")
MAX_STEPS = 10**12  # of a rung: far beyond any run, and well inside 64 bits
MAX_REDUCTION = 100
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,32}[a-z0-9])?")


class SweepProblem(ValueError):
    """A key of the sweep breaks its rule: `key` names it (`params.lr.min`), the message says the rule."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key, self.message = key, message


@dataclass(frozen=True)
class Metric:
    name: str
    goal: str = "minimize"

    def better(self, a: float, b: float) -> bool:
        return a < b if self.goal == "minimize" else a > b


@dataclass(frozen=True)
class Asha:
    """Successive halving's rungs: steps min_steps, min_steps x reduction, ... below max_steps. At each rung a trial
    goes on only if its metric is among the best 1/reduction of the values the trials reported there so far."""

    min_steps: int = 1
    max_steps: int = 100
    reduction: int = 3

    def rungs(self) -> list[int]:
        steps, found = self.min_steps, []
        while steps < self.max_steps:
            found.append(steps)
            steps *= self.reduction
        return found


@dataclass(frozen=True)
class Sweep:
    name: str
    params: dict[str, dict[str, Any]]
    search: str = "grid"
    max_trials: int | None = None
    parallel: int = 1
    seed: int = 0
    metric: Metric | None = None
    trials: list[dict[str, ParamValue]] = field(default_factory=list)
    asha: Asha | None = None


def _int(raw: Mapping[str, Any], key: str, low: int, high: int, default: int | None) -> int | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SweepProblem(key, f"must be an integer from {low} to {high}")
    return value


MAX_BOUND = 1e15  # of a range: its span stays finite, and an integer drawn from it fits 64 bits


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= MAX_BOUND:
        raise SweepProblem(key, f"must be a number from {-MAX_BOUND:g} to {MAX_BOUND:g}")  # NaN fails <= too
    return float(value)


def _param(name: str, spec: object) -> dict[str, Any]:
    key = f"params.{name}"
    if not isinstance(spec, dict):
        raise SweepProblem(key, "must be {values: [...]} or {min, max, log, integer}")
    unknown = sorted(set(spec) - {"values", "min", "max", "log", "integer"})
    if unknown:
        raise SweepProblem(f"{key}.{unknown[0]}", "unknown key; a param takes values, or min, max, log and integer")
    if "values" in spec:
        if set(spec) != {"values"}:
            raise SweepProblem(key, "values or min/max, not both")
        return _values(name, spec["values"])
    return _range(key, spec)


def _values(name: str, values: object) -> dict[str, Any]:
    key = f"params.{name}.values"
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_VALUES:
        raise SweepProblem(key, f"must be a list of 1 to {MAX_VALUES} values")
    problem = next((p for p in (params_problem({name: value}) for value in values) if p), None)
    if problem:
        raise SweepProblem(key, problem[1])
    return {"values": list(values)}


def _range(key: str, spec: dict[str, Any]) -> dict[str, Any]:
    if "min" not in spec or "max" not in spec:
        raise SweepProblem(key, "must have values, or both min and max")
    low, high = _number(f"{key}.min", spec["min"]), _number(f"{key}.max", spec["max"])
    if low > high:
        raise SweepProblem(f"{key}.min", "must not be above max")
    for flag in ("log", "integer"):
        if not isinstance(spec.get(flag, False), bool):
            raise SweepProblem(f"{key}.{flag}", "must be true or false")
    if spec.get("log") and low <= 0:
        raise SweepProblem(f"{key}.min", "must be above 0 with log: true")
    return {"min": low, "max": high, "log": bool(spec.get("log")), "integer": bool(spec.get("integer"))}


def _metric(raw: object) -> Metric | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"name", "goal"} or not isinstance(raw.get("name"), str):
        raise SweepProblem("metric", "must be {name: <a metric paddlecloud.metrics.log reports>, goal: ...}")
    if not valid_name(raw["name"]):
        raise SweepProblem("metric.name", "a metric's name: 1 to 64 printable characters, as metrics.log takes it")
    goal = raw.get("goal", "minimize")
    if goal not in GOALS:
        raise SweepProblem("metric.goal", f"must be one of {', '.join(GOALS)}")
    return Metric(raw["name"], goal)


def _draw(spec: dict[str, Any], rng: random.Random) -> ParamValue:
    if "values" in spec:
        value: ParamValue = rng.choice(spec["values"])
        return value
    low, high = spec["min"], spec["max"]
    drawn = math.exp(rng.uniform(math.log(low), math.log(high))) if spec["log"] else rng.uniform(low, high)
    return round(drawn) if spec["integer"] else drawn


def _grid(params: dict[str, dict[str, Any]], most: int | None) -> list[dict[str, ParamValue]]:
    for name, spec in params.items():
        if "values" not in spec:
            raise SweepProblem(f"params.{name}", "a grid needs values (min/max is for search: random)")
    size = math.prod(len(spec["values"]) for spec in params.values())
    if size > MAX_TRIALS and (most is None or most > MAX_TRIALS):
        raise SweepProblem("params", f"the grid has {size} combinations; at most {MAX_TRIALS} (or set max_trials)")
    names = list(params)
    combos = itertools.islice(itertools.product(*(params[n]["values"] for n in names)), most or size)
    return [dict(zip(names, combo, strict=True)) for combo in combos]


def _asha(raw: object) -> Asha:
    if not isinstance(raw, dict):
        raise SweepProblem("asha", "required with search: asha: {min_steps, max_steps, reduction}")
    unknown = sorted(set(raw) - {"min_steps", "max_steps", "reduction"})
    if unknown:
        raise SweepProblem(f"asha.{str(unknown[0])[:40]}", "unknown key; asha takes min_steps, max_steps, reduction")
    low = _int(raw, "min_steps", 1, MAX_STEPS, 1) or 1
    high = _int(raw, "max_steps", 1, MAX_STEPS, None)
    if high is None:
        raise SweepProblem("asha.max_steps", "required: the step a trial that is never stopped ends at")
    if high <= low:
        raise SweepProblem("asha.max_steps", "must be above min_steps")
    reduction = _int(raw, "reduction", 2, MAX_REDUCTION, 3) or 3
    return Asha(low, high, reduction)


def _asha_for(raw: Mapping[str, Any], search: str, metric: Metric | None) -> Asha | None:
    if search != "asha":
        if "asha" in raw:
            raise SweepProblem("asha", "only with search: asha")
        return None
    if metric is None:
        raise SweepProblem("metric", "required with search: asha (its rungs compare the trials by it)")
    return _asha(raw.get("asha"))


def running_settings(raw: Mapping[str, Any]) -> tuple[int, Metric | None, Asha | None]:
    """`parallel`, the metric and the rungs of a sweep already checked (as stored), without drawing its trials."""
    metric = _metric(raw.get("metric"))
    asha = _asha(raw.get("asha")) if raw.get("search") == "asha" else None
    return int(raw.get("parallel") or 1), metric, asha


def keep_policy(raw: Mapping[str, Any]) -> tuple[int, int]:
    """(best, latest): how many checkpoints of each ended trial `keep: {best: N, latest: M}` keeps (the contract's
    rule, paddlecloud.contract.keeping; the goal is the metric's)."""
    keep = raw.get("keep", {})
    problem = keeping.policy_problem(keep, with_goal=False)
    if problem:
        raise SweepProblem(*problem)
    best, latest, _ = keeping.policy(keep)
    if latest == 0 and _metric(raw.get("metric")) is None:
        raise SweepProblem("keep", "must keep at least one checkpoint: latest >= 1, or best >= 1 with a metric")
    return best, latest


def parse(raw: object) -> Sweep:
    """The sweep `raw` (a mapping, as JSON or YAML gives it) checked, with its trials; SweepProblem naming the key."""
    if not isinstance(raw, dict):
        raise SweepProblem("sweep", "must be an object of the keys " + ", ".join(sorted(KEYS)))
    unknown = sorted(set(raw) - KEYS - {"template", "then"})  # the job specs: checked as jobs (services)
    if unknown:
        raise SweepProblem(str(unknown[0])[:40], "unknown key; a sweep takes " + ", ".join(sorted(KEYS)))
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SweepProblem("name", f"a-z first, then a-z, 0-9 or '-', not '-' last, at most {MAX_NAME} characters")
    search = raw.get("search", "grid")
    if search not in SEARCHES:
        raise SweepProblem("search", f"must be one of {', '.join(SEARCHES)}")
    params_raw = raw.get("params")
    if not isinstance(params_raw, dict) or not params_raw:
        raise SweepProblem("params", "must name at least one param")
    bad = params_problem(dict.fromkeys(params_raw, 0))  # the names and their count, by the job spec's own rule
    if bad:
        raise SweepProblem(bad[0], bad[1])
    params = {str(n): _param(str(n), spec) for n, spec in params_raw.items()}
    most = _int(raw, "max_trials", 1, MAX_TRIALS, None)
    seed = _int(raw, "seed", 0, 2**32 - 1, 0) or 0
    metric = _metric(raw.get("metric"))
    asha = _asha_for(raw, search, metric)
    keep_policy(raw)
    if search in ("random", "asha"):
        if most is None:
            raise SweepProblem("max_trials", f"required with search: {search}")
        rng = random.Random(seed)  # noqa: S311 - a reproducible draw from the sweep's seed, not a secret
        trials = [{n: _draw(spec, rng) for n, spec in params.items()} for _ in range(most)]
    else:
        trials = _grid(params, most)
    parallel = _int(raw, "parallel", 1, MAX_PARALLEL, 1) or 1
    return Sweep(name, params, search, most, parallel, seed, metric, trials, asha)
