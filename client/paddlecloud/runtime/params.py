"""The job's params inside the job: `paddlecloud.params()` reads what `-param NAME=VALUE` (or the spec's `params`)
set, typed as given (string, integer, number or bool), from PADDLECLOUD_PARAMS."""

from __future__ import annotations

import json
import os

from paddlecloud.contract.jobenv import env_name
from paddlecloud.contract.spec import ParamValue, params_problem


def params() -> dict[str, ParamValue]:
    """The job's params ({} where it has none); ValueError naming the variable where it is not the portal's."""
    raw = os.environ.get(env_name("params"), "")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValueError(f"{env_name('params')} is not JSON") from None
    problem = params_problem(value)
    if problem:
        raise ValueError(f"{env_name('params')}: {problem[0]}: {problem[1]}")
    return dict(value)
