"""Listed Kubernetes objects (plain dicts) -> one Observation per job: pure functions, no cluster calls.

Rules, in order of precedence:
1. The trainers' Job has `SuccessCriteriaMet` or `Complete` -> succeeded (pservers that ended since
   are no loss).
2. A pserver pod ended (whatever its exit code: code 0 too), restarted, was replaced or vanished ->
   failed, `PserverLost` (trainers would exit 0 with nothing learned; paddle-notes trap 8).
3. The trainers' Job has `FailureTarget` or `Failed` -> failed: `OOMKilled` (naming the container's memory
   limit) if the failing trainer's last container was, else `BackoffLimit` (max_retries > 0) or
   `TrainerFailed`, with its exit code.
4. A pod refused by the ResourceQuota (a `FailedCreate` event saying "exceeded quota") -> pending,
   `QuotaExceeded` with the API server's message; failed with `QuotaExceeded` once the rejection has lasted
   `quota_grace` seconds since the engine first saw it (a rejection can be momentary, e.g. while the pods of a
   killed job are still terminating, and the Job controller keeps retrying).
5. A pod the scheduler cannot place -> pending, `Unschedulable` with the scheduler's message; a pod
   whose image cannot be pulled -> pending, `ImagePullBackOff` with the kubelet's message (the registry's
   answer) and what it means (a missing or refused login, an untrusted certificate). The reconciler's
   pending timeout ends both.
6. Every worker running (or already done) -> running; otherwise pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from paddlecloud.contract import exitcodes
from paddlecloud.contract.units import parse_time

from jobs.engines.base import Observation, WorkerStatus
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.pods import (
    LIVE_PHASES,
    JobObjects,
    Obj,
    conditions,
    container_status,
    describe,
    failure_count,
    index_set,
    memory_limit,
    phase,
    terminated,
)
from jobs.models import JobState, Reason, Role, WorkerState

IMAGE_PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
# What the registry's refusal means for the user, by a phrase of containerd's message (seen with the real
# kubelet + containerd 2.x and the distribution registry, tests/k8s/test_registry_pulls.py).
PULL_HINTS = (
    ("no basic auth credentials", "the registry wants a login: submit with a registry secret for it (-registry)"),
    ("401 Unauthorized", "the registry refused the login: check the registry secret's username and password"),
    (
        "certificate signed by unknown authority",
        "the node does not trust the registry's certificate (operators: containerd certs.d)",
    ),
)
# The failures whose worker's own last error line is worth quoting (explain), by the role that failed.
_EXPLAINED: dict[str, Role] = {
    Reason.PSERVER_LOST: Role.PSERVER,
    Reason.TRAINER_FAILED: Role.TRAINER,
    Reason.BACKOFF_LIMIT: Role.TRAINER,
}
_CANNOT_GO_ON = "; the job cannot go on without it"
VANISHED_AFTER = 30.0  # seconds: a job's Job/StatefulSet missing for longer than this was deleted behind our back


@dataclass(frozen=True)
class Facts:
    """What the status rules need to know of the job row."""

    uid: str
    trainers: int
    pservers: int
    max_retries: int
    age: float  # seconds since it was submitted
    pserver_pods: dict[int, str] = field(default_factory=dict)  # index -> uid of the pod first seen running
    running: bool = False  # the job was already running
    quota_grace: float = 30.0
    # Seconds since the engine first saw its pods refused by the quota (0: not before this look). Not the job's age:
    # a job Kueue held for long may meet a rejection at once on its admission, while its victims' pods terminate.
    quota_rejected_for: float = 0.0


def pull_message(why: str, kubelet_message: str) -> str:
    """The kubelet's words on a failed pull (they carry the registry's answer), with what they mean."""
    hint = next((hint for phrase, hint in PULL_HINTS if phrase in kubelet_message), "")
    return f"{why}: {kubelet_message}" + (f" ({hint})" if hint else "")


def _pending_detail(pod: Obj) -> tuple[str, str]:
    """(reason, message) of a pod that does not run yet."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return Reason.UNSCHEDULABLE, cond.get("message") or "no node can take it"
    waiting = (container_status(pod).get("state") or {}).get("waiting") or {}
    why = waiting.get("reason") or ""
    if why in IMAGE_PULL_REASONS:
        return Reason.IMAGE_PULL, pull_message(why, waiting.get("message") or "cannot pull the image")
    if why and why not in ("ContainerCreating", "PodInitializing"):
        return "", f"{why}: {waiting.get('message') or ''}".rstrip(": ")
    return "", ""


def _started(pod: Obj) -> datetime | None:
    state = container_status(pod).get("state") or {}
    running = state.get("running") or state.get("terminated") or {}
    return parse_time(running.get("startedAt")) or parse_time((pod.get("status") or {}).get("startTime"))


def _status(role: Role, index: int, state: WorkerState, pod: Obj | None, **kw: Any) -> WorkerStatus:
    host = ((pod or {}).get("spec") or {}).get("nodeName") or ""
    return WorkerStatus(role=role, index=index, state=state, host=host, started_at=_started(pod) if pod else None, **kw)


@dataclass
class _Problem:
    reason: str
    message: str
    exit_code: int | None = None


def _pserver(f: Facts, index: int, pods: list[Obj]) -> tuple[WorkerStatus, _Problem | None]:
    name = f"pserver {index}"
    if not pods:
        if index in f.pserver_pods:
            lost = _Problem(
                Reason.PSERVER_LOST, f"{name} vanished (its pod was deleted); the job cannot go on without it"
            )
            return _status(Role.PSERVER, index, WorkerState.FAILED, None, message="its pod was deleted"), lost
        return _status(Role.PSERVER, index, WorkerState.PENDING, None, message="waiting for its pod"), None
    pod = pods[-1]
    status = container_status(pod)
    restarts = int(status.get("restartCount") or 0)
    last = (status.get("lastState") or {}).get("terminated")
    term = terminated(pod)
    seen = f.pserver_pods.get(index)
    what = ""
    code = None
    if phase(pod) in ("Failed", "Succeeded") or term:
        what, code = describe(term, "stopped", memory_limit(pod)), (term or {}).get("exitCode")
        reason = (pod.get("status") or {}).get("reason")
        if reason and not term:
            what = f"was {reason}: {(pod.get('status') or {}).get('message') or ''}".rstrip(": ")
    elif restarts or last:
        what, code = f"restarted after it {describe(last, 'stopped', memory_limit(pod))}", (last or {}).get("exitCode")
    elif seen and pod["metadata"].get("uid") != seen:
        what = "was replaced by a new pod (the first one was deleted or evicted)"
    elif pod["metadata"].get("deletionTimestamp"):
        what = "is being deleted"
    if what:
        problem = _Problem(Reason.PSERVER_LOST, f"{name} {what}{_CANNOT_GO_ON}", code)
        return _status(
            Role.PSERVER, index, WorkerState.FAILED, pod, restarts=restarts, exit_code=code, message=what
        ), problem
    if phase(pod) == "Running":
        return _status(Role.PSERVER, index, WorkerState.RUNNING, pod), None
    reason, message = _pending_detail(pod)
    pending = _Problem(reason, f"{name}: {message}") if message else None
    return _status(Role.PSERVER, index, WorkerState.PENDING, pod, message=message), pending


def _trainer_reason(f: Facts, term: Obj | None, code: int | None) -> str:
    """Why a trainer's failure fails the job: its memory limit, the launcher's rendezvous bound, or its own exit."""
    if (term or {}).get("reason") == "OOMKilled":
        return Reason.OOM_KILLED
    if code == exitcodes.RENDEZVOUS:  # the launcher gave up on the trainers' gloo rendezvous (its message says why)
        return Reason.RENDEZVOUS_TIMEOUT
    return Reason.BACKOFF_LIMIT if f.max_retries else Reason.TRAINER_FAILED


def _trainer(
    f: Facts, index: int, pods: list[Obj], completed: set[int], failed: set[int], job_failed: bool
) -> tuple[WorkerStatus, _Problem | None]:
    name = f"trainer {index}"
    pod = pods[-1] if pods else None
    restarts = failure_count(pod) if pod else 0
    if index in completed:
        return _status(Role.TRAINER, index, WorkerState.SUCCEEDED, pod, restarts=restarts, exit_code=0), None
    if pod is None:
        state = WorkerState.FAILED if index in failed else WorkerState.PENDING
        return _status(Role.TRAINER, index, state, None, message="waiting for its pod"), None
    term = terminated(pod)
    code = (term or {}).get("exitCode")
    current = phase(pod)
    if current == "Succeeded":
        return _status(Role.TRAINER, index, WorkerState.SUCCEEDED, pod, restarts=restarts, exit_code=0), None
    if current == "Failed":
        ended = f"failed: {(pod.get('status') or {}).get('reason') or 'no exit status'}"
        what = describe(term, ended, memory_limit(pod))
        if index in failed:
            retries = f" after {restarts} restart(s)" if f.max_retries else ""
            reason = _trainer_reason(f, term, code)
            problem = _Problem(reason, f"{name} {what}{retries}", code)
            return _status(
                Role.TRAINER, index, WorkerState.FAILED, pod, restarts=restarts, exit_code=code, message=what
            ), problem
        if job_failed:
            return _status(
                Role.TRAINER, index, WorkerState.KILLED, pod, restarts=restarts, exit_code=code, message=what
            ), None
        message = f"restarting after it {what} (attempt {restarts + 2} of {f.max_retries + 1})"
        return _status(
            Role.TRAINER, index, WorkerState.PENDING, pod, restarts=restarts + 1, exit_code=code, message=message
        ), None
    if current == "Running":
        return _status(Role.TRAINER, index, WorkerState.RUNNING, pod, restarts=restarts), None
    reason, message = _pending_detail(pod)
    pending = _Problem(reason, f"{name}: {message}") if message else None
    return _status(Role.TRAINER, index, WorkerState.PENDING, pod, restarts=restarts, message=message), pending


def _quota_rejection(objs: JobObjects) -> str | None:
    messages = [e.get("message", "") for e in objs.create_failures if "exceeded quota" in e.get("message", "")]
    return messages[-1] if messages else None


def missing_pods(f: Facts, objs: JobObjects) -> bool:
    """True if some worker that should have a live pod has none (then FailedCreate events are worth a look)."""
    if objs.trainer_job is None or (f.pservers and objs.pserver_set is None):
        return False
    conds = conditions(objs.trainer_job)
    if {"Complete", "SuccessCriteriaMet", "Failed", "FailureTarget", "Suspended"} & set(conds):
        return False
    status = objs.trainer_job.get("status") or {}
    done = index_set(status.get("completedIndexes"))
    live = {(r, i) for (r, i), pods in objs.workers().items() if any(phase(p) in LIVE_PHASES for p in pods)}
    wanted = {("trainer", i) for i in range(f.trainers) if i not in done} | {("pserver", i) for i in range(f.pservers)}
    return bool(wanted - live)


def observe(f: Facts, objs: JobObjects) -> Observation:
    """The job's state, reason, per-worker status from what was listed of it."""
    job_conds = conditions(objs.trainer_job)
    job_failed = "Failed" in job_conds or "FailureTarget" in job_conds
    job_done = "Complete" in job_conds or "SuccessCriteriaMet" in job_conds
    statuses, problems = _workers(f, objs, job_failed)

    if job_done:  # every trainer succeeded: a pserver that ended since is no loss
        return Observation(JobState.SUCCEEDED, exit_code=0, workers=statuses)
    lost = _first(problems, Reason.PSERVER_LOST)
    if lost:
        return Observation(JobState.FAILED, lost.reason, lost.message, lost.exit_code, statuses)
    if job_failed:
        return _failed(f, job_conds, problems, statuses)
    vanished = _vanished(f, objs)
    if vanished:
        return Observation(JobState.FAILED, Reason.LAUNCH_FAILED, vanished, None, statuses)
    return _not_ended(f, objs, problems, statuses)


def _workers(f: Facts, objs: JobObjects, job_failed: bool) -> tuple[list[WorkerStatus], list[_Problem]]:
    """Each worker's status (pservers first), and the problems found on the way."""
    workers = objs.workers()
    job_status = (objs.trainer_job or {}).get("status") or {}
    completed = index_set(job_status.get("completedIndexes"))
    failed = index_set(job_status.get("failedIndexes"))
    statuses: list[WorkerStatus] = []
    problems: list[_Problem] = []
    for i in range(f.pservers):
        status, problem = _pserver(f, i, workers.get(("pserver", i), []))
        statuses.append(status)
        problems += [problem] if problem else []
    for i in range(f.trainers):
        status, problem = _trainer(f, i, workers.get(("trainer", i), []), completed, failed, job_failed)
        statuses.append(status)
        problems += [problem] if problem else []
    return statuses, problems


def _first(problems: list[_Problem], *reasons: str) -> _Problem | None:
    return next((p for p in problems if p.reason in reasons), None)


def _failed(f: Facts, job_conds: dict[str, Obj], problems: list[_Problem], statuses: list[WorkerStatus]) -> Observation:
    """The failure of a job whose trainer Job failed: a worker's own reason, else the Job's condition."""
    failure = _first(
        problems, Reason.OOM_KILLED, Reason.RENDEZVOUS_TIMEOUT, Reason.BACKOFF_LIMIT, Reason.TRAINER_FAILED
    )
    if failure:
        return Observation(JobState.FAILED, failure.reason, failure.message, failure.exit_code, statuses)
    cond = job_conds.get("Failed") or job_conds.get("FailureTarget") or {}
    why: str = Reason.BACKOFF_LIMIT if f.max_retries else Reason.TRAINER_FAILED
    message = f"the trainers failed: {cond.get('message') or cond.get('reason') or 'no message'}"
    return Observation(JobState.FAILED, why, message, None, statuses)


def _vanished(f: Facts, objs: JobObjects) -> str | None:
    """Why the job failed if its Job or StatefulSet was deleted outside PaddleCloud, or None."""
    gone = []
    if objs.trainer_job is None:
        gone.append(f"Job {names.trainer_job_name(f.uid)}")
    if f.pservers and objs.pserver_set is None:
        gone.append(f"StatefulSet {names.pserver_set_name(f.uid)}")
    if gone and f.age > VANISHED_AFTER:
        return f"the {' and '.join(gone)} of the job disappeared (deleted outside PaddleCloud?)"
    return None


def _not_ended(f: Facts, objs: JobObjects, problems: list[_Problem], statuses: list[WorkerStatus]) -> Observation:
    """A job still pending or running: what, if anything, holds it up (a quota fails it after a grace)."""
    current = JobState.RUNNING if f.running else JobState.PENDING
    rejected = _quota_rejection(objs) if missing_pods(f, objs) else None
    if rejected:
        if f.quota_rejected_for > f.quota_grace:
            return Observation(JobState.FAILED, Reason.QUOTA_EXCEEDED, rejected, None, statuses)
        return Observation(current, Reason.QUOTA_EXCEEDED, rejected, None, statuses)
    if all(s.state in (WorkerState.RUNNING, WorkerState.SUCCEEDED) for s in statuses):
        return Observation(JobState.RUNNING, workers=statuses)
    blocking = _first(problems, Reason.UNSCHEDULABLE, Reason.IMAGE_PULL) or _first(problems, "")
    if blocking:
        return Observation(current, blocking.reason, blocking.message, None, statuses)
    other = [e.get("message", "") for e in objs.create_failures]
    if other and missing_pods(f, objs):
        return Observation(current, "", f"cannot create a pod: {other[-1]}", None, statuses)
    return Observation(current, workers=statuses)


def explain(seen: Observation, reason_of: Callable[[WorkerStatus], str]) -> Observation:
    """A failed job's observation with its failing worker's last error line (`reason_of` reads it from the
    worker's log on the PFS: jobs.files.errorline) in the worker's and the job's message; others unchanged."""
    role = _EXPLAINED.get(seen.reason)
    if seen.state != JobState.FAILED or role is None:
        return seen
    head = seen.message.removesuffix(_CANNOT_GO_ON)
    worker = next((w for w in seen.workers if w.role == role and head.startswith(f"{role} {w.index} ")), None)
    why = reason_of(worker) if worker is not None and worker.state == WorkerState.FAILED else ""
    if not why or worker is None:
        return seen
    workers = [replace(w, message=f"{w.message}: {why}") if w is worker else w for w in seen.workers]
    tail = seen.message[len(head) :]
    return replace(seen, message=f"{head}: {why}{tail}", workers=workers)
