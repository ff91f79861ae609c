"""Experiments through the API: a sweep over a job template (grid or random search of params), its trials and its
best trial, and kill. `submit -sweep` uploads the package first (jobs.submit) and makes the experiment of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.session import Session

MAX_SWEEP_FILE = 1024 * 1024  # bytes: a sweep file is a few lines; a 1,000-trial grid is a few values
SET_BY_SWEEP = ("jobname", "params")  # each trial's own


def read_sweep(path: str | Path) -> dict[str, Any]:
    """A sweep file (YAML or JSON) as a mapping; UsageProblem naming the file where it is not one."""
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_SWEEP_FILE:
            raise UsageProblem(f"-sweep: {path} is larger than {MAX_SWEEP_FILE} bytes")
        sweep = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise UsageProblem(f"-sweep: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageProblem(f"-sweep: {path} is not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(sweep, dict):
        raise UsageProblem(f"-sweep: {path} must hold a mapping: name, params, search, ...")
    return sweep


def path_of(name: str) -> str:
    return f"/experiments/{quote(name, safe='')}"


def create(session: Session, sweep: dict[str, Any], job_spec: dict[str, Any]) -> dict[str, Any]:
    """The experiment: `sweep` over `job_spec`, the template every trial is made from (its name and params aside)."""
    template = {key: value for key, value in job_spec.items() if key not in SET_BY_SWEEP}
    answer: dict[str, Any] = session.post("/experiments", {**sweep, "template": template})
    return answer


def list_all(session: Session) -> Iterator[dict[str, Any]]:
    yield from session.paginate("/experiments")


def get(session: Session, name: str) -> dict[str, Any]:
    answer: dict[str, Any] = session.get(path_of(name))
    return answer


def trials(session: Session, name: str, ordering: str = "metric") -> Iterator[dict[str, Any]]:
    """Its trials, the best first by the experiment's metric (or `ordering`: index, best, last, steps, - first)."""
    yield from session.paginate(f"{path_of(name)}/trials", {"ordering": ordering})


def kill(session: Session, name: str) -> dict[str, Any]:
    answer: dict[str, Any] = session.post(f"{path_of(name)}/kill")
    return answer
