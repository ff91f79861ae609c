"""Experiments through the API: a sweep over a job template (grid, random or ASHA search of params), its trials
and its best trial, and kill. `submit -sweep` uploads the package first (jobs.submit) and makes the experiment of
it; so does `Experiment.submit`, the object a script uses:

```python
from paddlecloud import Experiment, PaddleJob

job = PaddleJob(job_name="lr", entry_point="python train.py", trainer_package_path="./fit_a_line", cpu_nums=1)
sweep = {"name": "lr", "params": {"lr": {"values": [0.01, 0.05, 0.1]}}, "parallel": 2,
         "metric": {"name": "loss", "goal": "minimize"}}
experiment = Experiment.submit(sweep, job)     # or a sweep file's path; Experiment("lr") for one that exists
experiment.wait()
print(experiment.best())                       # the best trial: index, params, job, best, last, steps
for trial in experiment.trials():              # the best first
    print(trial["params"], trial["best"])
```
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from paddlecloud.sdk import jobs
from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.session import Session

RUNNING = "running"

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


class Experiment:
    """One experiment of the user's, by name (the newest of that name) or uid."""

    def __init__(self, name: str, session: Session | None = None, config: str | None = None) -> None:
        self.name = name
        self._session, self._config = session, config
        self.experiment: dict[str, Any] | None = None  # the portal's last answer

    @classmethod
    def submit(cls, sweep: dict[str, Any] | str | Path, job: Any, progress: Any = None) -> Experiment:
        """Make the experiment of `sweep` (a mapping, or a sweep file's path) over `job` (a PaddleJob: its spec is
        the template, its package is uploaded once, as `paddlectl submit -sweep` does)."""
        sweep = dict(sweep) if isinstance(sweep, dict) else read_sweep(sweep)
        spec = job.to_spec()
        sweep.setdefault("name", spec["jobname"])
        if job.trainer_package_path is None:
            raise UsageProblem("Experiment.submit: the PaddleJob needs trainer_package_path (a directory, /pfs/ path)")
        session = job.session
        made, _ = jobs.submit(session, spec, job.trainer_package_path, progress,
                              create=lambda checked: create(session, sweep, checked))  # fmt: skip
        found = cls(made["uid"], session)
        found.experiment = made
        return found

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = Session.for_script(self._config)
        return self._session

    def _ref(self) -> str:
        return self.experiment["uid"] if self.experiment else self.name

    def status(self) -> dict[str, Any]:
        """The experiment now: state, message, trial counts by state, best_trial, the sweep and the template."""
        self.experiment = get(self.session, self._ref())
        return self.experiment

    def trials(self, ordering: str = "metric") -> list[dict[str, Any]]:
        """Its trials, the best first by its metric (or `ordering`: index, best, last, steps; a '-' first reverses)."""
        return list(trials(self.session, self._ref(), ordering))

    def best(self) -> dict[str, Any] | None:
        """The trial with the best metric so far (index, params, job, state, best, last, steps); None before any."""
        found: dict[str, Any] | None = self.status().get("best_trial")
        return found

    def wait(self, timeout: float | None = None, poll: float = 5.0) -> dict[str, Any]:
        """Block until the experiment is no longer running (every trial ended, or it was killed); returns it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.status()["state"] == RUNNING:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"experiment {self.name} still runs after {timeout} s")
            time.sleep(poll)
        assert self.experiment is not None
        return self.experiment

    def kill(self) -> dict[str, Any]:
        """Submit no more trials and kill every trial still waiting or running."""
        self.experiment = kill(self.session, self._ref())
        return self.experiment
