"""The spec rules of paddlecloud.contract.spec that depend on the job's mode or its entry: plain unit tests."""

from __future__ import annotations

import pytest
from paddlecloud.contract import spec as rules
from paddlecloud.sdk import spec as ctl_spec
from paddlecloud.sdk.errors import UsageProblem


@pytest.mark.parametrize(
    "entry",
    [
        "python -m paddle.distributed.launch train.py",
        "python3 -m paddle.distributed.launch --nproc_per_node 2 train.py",
        "python -m paddle.distributed.fleet.launch train.py",
        "fleetrun train.py",
        "cd src && fleetrun --server_num=2 train.py",
        "/opt/venv/bin/fleetrun train.py",
    ],
)
def test_paddles_own_launchers_are_refused_with_why(entry: str) -> None:
    problem = rules.entry_problem(entry)
    assert problem and "PaddleCloud already starts each trainer and pserver" in problem and "rank 0 of 1" in problem


@pytest.mark.parametrize("entry", ["python train.py", "python launch.py", "python fleetrunner.py", "sh run_fleet.sh"])
def test_ordinary_entries_pass(entry: str) -> None:
    assert rules.entry_problem(entry) is None


@pytest.mark.parametrize("name", ["FLAGS_enable_pir_api", "TRAINING_ROLE"])
def test_names_only_ps_mode_sets_are_reserved_in_ps_mode_only(name: str) -> None:
    env = {name: "0"}
    assert "parameter-server mode" in (rules.env_problem(env, 2) or "")
    assert rules.env_problem(env, 0) is None
    assert rules.env_problem(env) is None  # mode not known yet (paddlectl's -env parsing): the spec check decides
    assert "set by PaddleCloud" in (rules.env_problem({"PADDLE_TRAINER_ID": "1"}, 0) or "")


def test_paddlectl_checks_the_flag_against_the_jobs_mode() -> None:
    spec = {"jobname": "fit", "entry": "python train.py", "env": {"FLAGS_enable_pir_api": "0"}}
    assert ctl_spec.check({**spec, "pservers": 0}) is not None
    with pytest.raises(UsageProblem, match="-env: 'FLAGS_enable_pir_api' is set by PaddleCloud in parameter-server"):
        ctl_spec.check({**spec, "pservers": 1})
    with pytest.raises(UsageProblem, match="-entry: must not run Paddle's launcher"):
        ctl_spec.check({**spec, "entry": "python -m paddle.distributed.launch train.py"})
