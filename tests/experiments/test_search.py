"""experiments.search, pure: a sweep's keys checked (each problem names its key) and the trials its search makes."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.search import MAX_TRIALS, Asha, SweepProblem, parse

GRID: dict[str, Any] = {"name": "lr-sweep", "params": {"lr": {"values": [0.1, 0.01]}, "batch": {"values": [32, 64]}}}
ASHA: dict[str, Any] = {"search": "asha", "max_trials": 9, "metric": {"name": "loss"}, "asha": {"max_steps": 100}}


def test_a_grid_is_every_combination_in_order() -> None:
    sweep = parse(GRID)
    assert sweep.trials == [
        {"lr": 0.1, "batch": 32}, {"lr": 0.1, "batch": 64}, {"lr": 0.01, "batch": 32}, {"lr": 0.01, "batch": 64},
    ]  # fmt: skip
    assert (sweep.search, sweep.parallel, sweep.metric) == ("grid", 1, None)
    assert len(parse({**GRID, "max_trials": 3}).trials) == 3


def test_random_draws_come_from_the_seed_alone_within_the_bounds() -> None:
    space = {"lr": {"min": 1e-4, "max": 1e-1, "log": True}, "layers": {"min": 1, "max": 8, "integer": True},
             "opt": {"values": ["adam", "sgd"]}}  # fmt: skip
    sweep = {"name": "r", "params": space, "search": "random", "max_trials": 50, "seed": 7}
    first, again, other = parse(sweep), parse(sweep), parse({**sweep, "seed": 8})
    assert first.trials == again.trials != other.trials
    for trial in first.trials:
        lr, layers = trial["lr"], trial["layers"]
        assert isinstance(lr, float) and 1e-4 <= lr <= 1e-1
        assert isinstance(layers, int) and 1 <= layers <= 8
        assert trial["opt"] in ("adam", "sgd")


def test_asha_draws_as_random_does_and_has_rungs_below_max_steps() -> None:
    sweep = parse({**GRID, **ASHA, "asha": {"min_steps": 10, "max_steps": 1000, "reduction": 4}, "seed": 3})
    assert sweep.asha is not None and sweep.asha.rungs() == [10, 40, 160, 640]
    random = parse({**GRID, "search": "random", "max_trials": 9, "seed": 3})
    assert sweep.trials == random.trials  # the same seed, the same draws
    assert len(sweep.trials) == 9
    assert parse({**GRID, **ASHA}).asha == Asha(min_steps=1, max_steps=100, reduction=3)


def test_a_thousand_trial_grid_is_one_parse() -> None:
    sweep = parse({"name": "big", "params": {"a": {"values": list(range(100))}, "b": {"values": list(range(10))}}})
    assert len(sweep.trials) == 1000


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"colour": "blue"}, "colour", "unknown key"),
        ({"name": "Bad_Name"}, "name", "a-z first"),
        ({"name": "x" * 35}, "name", "at most 34"),
        ({"search": "bayes"}, "search", "must be one of grid, random, asha"),
        ({**ASHA, "metric": None}, "metric", "required with search: asha"),
        ({**ASHA, "asha": None}, "asha", "required with search: asha"),
        ({**ASHA, "asha": {"min_steps": 10}}, "asha.max_steps", "required"),
        ({**ASHA, "asha": {"min_steps": 10, "max_steps": 10}}, "asha.max_steps", "above min_steps"),
        ({**ASHA, "asha": {"max_steps": 10, "reduction": 1}}, "reduction", "from 2 to 100"),
        ({**ASHA, "asha": {"max_steps": 10, "rungs": 3}}, "asha.rungs", "unknown key"),
        ({**ASHA, "asha": {"max_steps": 10**13}}, "max_steps", "from 1 to"),
        ({"asha": {"max_steps": 10}}, "asha", "only with search: asha"),
        ({"params": {}}, "params", "at least one param"),
        ({"params": {"LR": {"values": [1]}}}, "params.LR", "a name is a-z first"),
        ({"params": {"lr": {"values": []}}}, "params.lr.values", "a list of 1 to 1000"),
        ({"params": {"lr": {"values": [[1]]}}}, "params.lr.values", "a string, a number, true or false"),
        ({"params": {"lr": {"min": 1, "max": 0}}}, "params.lr.min", "must not be above max"),
        ({"params": {"lr": {"min": 0, "max": 1, "log": True}}}, "params.lr.min", "above 0 with log"),
        ({"params": {"lr": {"min": float("nan"), "max": 1}}}, "params.lr.min", "a number from -1e+15"),
        ({"params": {"lr": {"min": 10**400, "max": 1}}}, "params.lr.min", "a number from -1e+15"),
        ({"params": {"lr": {"min": -1e308, "max": 1e308}}}, "params.lr.min", "a number from -1e+15"),
        ({"params": {"lr": {"min": 0, "max": 1, "step": 2}}}, "params.lr.step", "unknown key"),
        ({"params": {"lr": {"min": 0, "max": 1}}}, "params.lr", "a grid needs values"),
        (
            {"params": {"a": {"values": list(range(1000))}, "b": {"values": list(range(1000))}}},
            "params",
            f"the grid has 1000000 combinations; at most {MAX_TRIALS}",
        ),
        ({"search": "random", "params": {"lr": {"min": 0, "max": 1}}}, "max_trials", "required with search: random"),
        ({"max_trials": 10**7}, "max_trials", f"from 1 to {MAX_TRIALS}"),
        ({"parallel": 0}, "parallel", "from 1 to 100"),
        ({"metric": {"name": "loss", "goal": "lowest"}}, "metric.goal", "minimize, maximize"),
        ({"metric": "loss"}, "metric", "must be {name"),
    ],
)
def test_a_bad_sweep_names_the_key_and_the_rule(change: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(SweepProblem) as refused:
        parse({**GRID, **change})
    assert refused.value.key == key
    assert words in refused.value.message
