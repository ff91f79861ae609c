"""The Python SDK: `PaddleJob`, `CephFSVolume` and `dist_train`, with the original documents' names.

```python
from paddlecloud import PaddleJob, dist_train

job = PaddleJob(job_name="fit", entry_point="python train.py", trainer_package_path="./fit_a_line",
                cpu_nums=1, memory="1Gi", trainers=2, pservers=2)
job.submit()                     # asks the portal, uploads ./fit_a_line to /pfs/<dc>/home/<user>/jobs/fit/, submits
for line in job.logs(follow=True):
    print(line, end="")
print(job.wait()["state"])       # succeeded | failed | killed
print(job.metrics()[-1])         # the last point trainer 0 logged: {"step": ..., "values": {"loss": ...}}
```

Both spellings of the original documents are accepted: `cpu_num`/`cpu_nums`, `gpu_num`/`gpu_nums`,
`base_image`/`runtime_image`, `trainer_package`/`trainer_package_path`. Parameters of the retired
v1/v2 runtime (input, output, port, ports_num, ...) are accepted and ignored with a warning. The SDK
talks to the portal of ~/.paddle/config (or $PADDLE_CONFIG), as paddlectl does, and shares its
token cache.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from paddlecloud.contract.states import SUCCEEDED
from paddlecloud.sdk import jobs, metrics
from paddlecloud.sdk import spec as specs
from paddlecloud.sdk.errors import JobFailed, UsageProblem
from paddlecloud.sdk.jobs import LogStream, job_path, lines
from paddlecloud.sdk.session import Session

# Spec field -> the PaddleJob parameter that sets it, for messages.
PARAMETERS = {
    "jobname": "job_name",
    "entry": "entry_point",
    "parallelism": "trainers",
    "min_parallelism": "min_trainers",
    "pservers": "pservers",
    "cpu": "cpu_nums",
    "memory": "memory",
    "gpu": "gpu_nums",
    "pscpu": "pscpu",
    "psmemory": "psmemory",
    "passes": "passes",
    "image": "runtime_image",
    "registry": "registry",
    "env": "env",
    "params": "params",
    "after": "after",
    "resume_from": "resume_from",
    "keep": "keep",
    "package": "trainer_package_path",
    "datacenter": "datacenter",
    "max_retries": "max_retries",
    "max_restarts": "max_restarts",
    "pending_timeout": "pending_timeout",
    "stall_timeout": "stall_timeout",
    "stall_action": "stall_action",
    "priority": "priority",
    "no_preempt": "no_preempt",
}
_RETIRED = ("input", "output", "num_gradient_servers", "port", "ports_num", "ports_num_for_sparse",
            "glusterfs_volume", "volume", "topology")


class CephFSVolume:
    """A CephFS volume as the original SDK described it (values also from CEPHFS_* variables).

    PaddleCloud mounts each datacenter's shared storage itself (your home at /pfs/<dc>/home/<user>),
    so a job needs no volume of its own; this class is kept so existing code runs unchanged.
    """

    def __init__(
        self,
        monitors_addr: str | list[str] | None = None,
        user: str | None = None,
        secret_name: str | None = None,
        mount_path: str | None = None,
        path: str | None = None,
        cephfs_path: str | None = None,
    ) -> None:
        monitors = monitors_addr if monitors_addr is not None else os.environ.get("CEPHFS_MONITOR_ADDRS", "")
        self.monitors_addr = [m.strip() for m in monitors.split(",") if m.strip()] if isinstance(monitors, str) \
            else list(monitors)
        self.user = user or os.environ.get("CEPHFS_USER", "admin")
        self.secret_name = secret_name or os.environ.get("CEPHFS_SECRET", "cephfs-secret")
        self.mount_path = mount_path or os.environ.get("CEPHFS_MOUNT_PATH", "/mnt/cephfs")
        if path is not None and cephfs_path is not None and path != cephfs_path:
            raise UsageProblem("CephFSVolume: give path or cephfs_path, not both")
        self.path = path or cephfs_path or os.environ.get("CEPHFS_PATH", "/")
        for name in ("mount_path", "path"):
            if not str(getattr(self, name)).startswith("/"):
                raise UsageProblem(f"CephFSVolume: {name} {getattr(self, name)!r} must be an absolute path")

    @property
    def volume(self) -> dict[str, Any]:
        return {"name": "cephfs", "cephfs": {"monitors": self.monitors_addr, "path": self.path, "user": self.user,
                                             "secretRef": {"name": self.secret_name}}}

    @property
    def volume_mount(self) -> dict[str, Any]:
        return {"name": "cephfs", "mountPath": self.mount_path}

    def __repr__(self) -> str:
        return f"CephFSVolume(monitors_addr={self.monitors_addr!r}, mount_path={self.mount_path!r}, path={self.path!r})"


def _one_of(label_a: str, a: Any, label_b: str, b: Any) -> Any:
    if a is not None and b is not None and a != b:
        raise UsageProblem(f"PaddleJob: give {label_a} or {label_b}, not both")
    return a if a is not None else b


def _quantity(value: Any) -> str:
    if isinstance(value, bool):
        raise UsageProblem(f"PaddleJob: {value!r} is not a quantity")
    return str(value)


class PaddleJob:
    """A distributed training job: build it, `submit()`, then `status()`, `wait()`, `logs()`, `kill()`."""

    def __init__(
        self,
        job_name: str | None = None,
        entry_point: str | None = None,
        memory: str = "1G",
        cpu_nums: int | float | str | None = None,
        runtime_image: str | None = None,
        pservers: int | None = None,
        trainers: int | None = None,
        gpu_nums: int | None = None,
        trainer_package_path: str | os.PathLike[str] | None = None,
        cephfs_volume: CephFSVolume | None = None,
        namespace: str = "default",
        *,
        datacenter: str | None = None,
        passes: int = 1,
        pscpu: int | float | str = "1",
        psmemory: str = "1Gi",
        env: dict[str, str] | None = None,
        params: dict[str, str | int | float | bool] | None = None,
        after: list[str] | None = None,
        resume_from: str | None = None,
        keep: dict[str, int | str] | None = None,
        registry: str = "",
        max_retries: int = 0,
        max_restarts: int = 0,
        min_trainers: int | None = None,
        pending_timeout: int | None = None,
        stall_timeout: int | None = None,
        stall_action: str | None = None,
        priority: str | None = None,
        no_preempt: bool = False,
        session: Any = None,
        config: str | os.PathLike[str] | None = None,
        cpu_num: int | float | str | None = None,
        gpu_num: int | None = None,
        base_image: str | None = None,
        trainer_package: str | os.PathLike[str] | None = None,
        use_gpu: bool | None = None,
        **retired: Any,
    ) -> None:
        unknown = sorted(set(retired) - set(_RETIRED))
        if unknown:
            raise TypeError(f"PaddleJob() got unexpected keyword argument(s): {', '.join(unknown)}")
        if retired:
            warnings.warn(
                f"PaddleJob: {', '.join(sorted(retired))} belonged to the retired v1/v2 runtime and are ignored",
                stacklevel=2,
            )
        if cephfs_volume is not None:
            if not isinstance(cephfs_volume, CephFSVolume):
                raise UsageProblem("PaddleJob: cephfs_volume must be a CephFSVolume")
            warnings.warn(
                "PaddleJob: cephfs_volume is not needed: every job sees the datacenter's storage at "
                "/pfs/<datacenter>/home/<user>",
                stacklevel=2,
            )
        if job_name is None:
            raise UsageProblem("PaddleJob: job_name is required")
        if entry_point is None:
            raise UsageProblem("PaddleJob: entry_point is required, e.g. \"python train.py\"")
        cpu = _one_of("cpu_nums", cpu_nums, "cpu_num", cpu_num)
        gpu = _one_of("gpu_nums", gpu_nums, "gpu_num", gpu_num)
        if gpu is None:
            gpu = 1 if use_gpu else 0
        elif use_gpu is False and gpu:
            raise UsageProblem("PaddleJob: use_gpu=False but gpu_nums > 0")
        self.job_name = job_name
        self.entry_point = entry_point
        self.memory = _quantity(memory)
        self.cpu_nums = _quantity(cpu if cpu is not None else 1)
        self.gpu_nums = gpu
        self.runtime_image = _one_of("runtime_image", runtime_image, "base_image", base_image) or ""
        self.trainers = 1 if trainers in (None, -1) else trainers
        self.pservers = 0 if pservers in (None, -1) else pservers
        package = _one_of("trainer_package_path", trainer_package_path, "trainer_package", trainer_package)
        self.trainer_package_path = os.fspath(package) if package is not None else None
        self.cephfs_volume = cephfs_volume
        self.namespace = namespace  # kept for the original's API; the portal picks the user's namespace
        self.datacenter = datacenter
        self.passes = passes
        self.pscpu = _quantity(pscpu)
        self.psmemory = _quantity(psmemory)
        self.env = dict(env or {})
        self.params = dict(params or {})  # the run's hyperparameters: paddlecloud.params() inside the job
        self.after = list(after or [])  # jobs it starts after: "NAME[:ok|any|failed]"
        self.resume_from = resume_from  # "JOB[:STEP]" to start from; "": never resume; None: the portal's rule
        self.keep = keep  # {best, latest, goal}: the checkpoints kept once it ended; None: its own save() decides
        self.registry = registry
        self.max_retries = max_retries
        self.max_restarts = max_restarts  # whole-job restarts from the latest checkpoint after a failure
        self.min_trainers = min_trainers  # elastic (collective): runs with min_trainers..trainers, as many as fit
        self.pending_timeout = pending_timeout
        self.stall_timeout = stall_timeout  # seconds without a trainer's log line: Stalled; None: the datacenter's
        self.stall_action = stall_action  # "warn" (the portal's default) or "fail"
        self.priority = priority  # a class of GET /api/v1/priorities; None: the portal's default (`normal`)
        self.no_preempt = no_preempt  # never preempted, where the class allows opting out
        self._session = session
        self._config = Path(config) if config is not None else None
        self.job: dict[str, Any] | None = None
        specs.check(self.to_spec(), PARAMETERS)

    def __repr__(self) -> str:
        state = f", state={self.job['state']!r}" if self.job else ""
        return f"PaddleJob(job_name={self.job_name!r}, trainers={self.trainers}, pservers={self.pservers}{state})"

    # --- spec -----------------------------------------------------------------------------

    def to_spec(self) -> dict[str, Any]:
        """The job spec the portal receives (without the package, which `submit` settles)."""
        spec: dict[str, Any] = {
            "jobname": self.job_name,
            "entry": self.entry_point,
            "parallelism": self.trainers,
            "pservers": self.pservers,
            "cpu": self.cpu_nums,
            "memory": self.memory,
            "gpu": self.gpu_nums,
            "pscpu": self.pscpu,
            "psmemory": self.psmemory,
            "passes": self.passes,
            "image": self.runtime_image,
            "registry": self.registry,
            "env": self.env,
            "max_retries": self.max_retries,
        }
        # Given only where set: an absent field is the portal's default (resume_from "" is "never", not absent).
        optional = {
            "params": self.params or None, "after": self.after or None, "resume_from": self.resume_from,
            "keep": self.keep, "max_restarts": self.max_restarts or None, "pending_timeout": self.pending_timeout,
            "min_parallelism": self.min_trainers,
            "stall_timeout": self.stall_timeout,
            "stall_action": self.stall_action or None, "datacenter": self.datacenter or None,
            "priority": self.priority or None, "no_preempt": True if self.no_preempt else None,
        }  # fmt: skip
        spec.update({field: value for field, value in optional.items() if value is not None})
        return spec

    # --- the portal -----------------------------------------------------------------------

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = Session.for_script(self._config)
        return self._session

    def _ref(self) -> str:
        # The uid pins this very run, even after another job reuses the name.
        return self.job["uid"] if self.job else self.job_name

    @property
    def state(self) -> str | None:
        return self.job["state"] if self.job else None

    def submit(self, progress: Any = None, chunk_size: int | None = None, dry_run: bool = False) -> dict[str, Any]:
        """Ask the portal (a dry run), upload the package (a local directory) to the job's folder, then submit.

        Returns the job. A job the portal refuses uploads nothing. dry_run=True only asks: it returns
        the portal's answer ({"dry_run": true, "job": ..., "requested": ...}) and creates nothing.
        """
        package = self.trainer_package_path
        if package is None:
            raise UsageProblem(
                "PaddleJob: trainer_package_path is required to submit: a local directory (uploaded) or a /pfs/ path"
            )
        answer, _ = jobs.submit(self.session, self.to_spec(), package, progress, chunk_size, PARAMETERS, dry_run)
        if not dry_run:
            self.job = answer
        return answer

    def status(self) -> dict[str, Any]:
        """The job as the portal sees it now: state, reason, message, trainers, pservers, ..."""
        self.job = jobs.get(self.session, self._ref())
        return self.job

    def wait(self, timeout: float | None = None, poll: float = 2.0, check: bool = False) -> dict[str, Any]:
        """Block until the job ends; returns it. check=True raises JobFailed unless it succeeded."""
        self.job = jobs.wait(self.session, self._ref(), timeout=timeout, poll=poll)
        if check and self.job.get("state") != SUCCEEDED:
            raise JobFailed(self.job)
        return self.job

    def logs(self, worker: str | None = None, follow: bool = False, tail: int | None = None,
             poll: float = 1.0) -> Iterator[str]:
        """The log lines (with their newline) of one worker, or of all (each line starts with [worker])."""
        stream = LogStream(self.session, self._ref(), worker=worker, tail=tail, follow=follow, poll=poll)
        yield from lines(iter(stream), prefix=worker is None)
        if follow and stream.job:
            self.job = stream.job

    def metrics(self, worker: str = "trainer-0") -> list[dict[str, Any]]:
        """Every point `worker` logged with paddlecloud.metrics.log so far: [{"step", "time", "values": {...}}]."""
        return metrics.points(self.session, self._ref(), worker)

    def checkpoints(self) -> list[dict[str, Any]]:
        """The run's checkpoints by step: step, path (/pfs/...), time, size, complete_size, metric."""
        found: list[dict[str, Any]] = self.session.get(f"{job_path(self._ref())}/checkpoints")["checkpoints"]
        return found

    def kill(self, rm: bool = False) -> dict[str, Any] | None:
        """Stop every worker; rm=True also removes the job from the history."""
        if rm:
            self.session.delete(job_path(self._ref()), {"rm": "1"})
            return None
        self.job = self.session.delete(job_path(self._ref()))
        return self.job


def dist_train(train_fn: Any, *args: Any, paddle_job: PaddleJob | None = None, **kwargs: Any) -> Any:
    """Train in the cloud from a notebook, or here.

    With PADDLE_NOTEBOOK=YES (set it in the notebook), upload the package and submit `paddle_job`;
    returns the submitted PaddleJob. Otherwise (inside the job, or a plain run) call
    `train_fn(*args, **kwargs)` and return what it returns. A v2-style trainer object (one with a
    `.train` method) is called as `trainer.train(*args, **kwargs)`.
    """
    if os.environ.get("PADDLE_NOTEBOOK", "NO").strip().upper() == "YES":
        if paddle_job is None:
            raise UsageProblem("dist_train: paddle_job is required when PADDLE_NOTEBOOK=YES")
        paddle_job.submit()
        return paddle_job
    if callable(train_fn):
        return train_fn(*args, **kwargs)
    train = getattr(train_fn, "train", None)
    if callable(train):
        return train(*args, **kwargs)
    raise TypeError("dist_train: train_fn must be a function (or an object with a .train method)")
