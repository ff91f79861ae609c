"""The engine interface: what every engine (local processes, Kubernetes) offers the job tasks.

Engines report, the domain records: an engine writes no Job or Worker row. `poll` returns what it saw
(an Observation per job); what an engine did and must not forget (a process it spawned, the ports it
chose, a stop it asked for) it reports, at once and before it acts on it, to the `Recorder` the caller
hands it (jobs.records writes it), so a worker process that dies mid-start leaves no stranger behind.
What an engine must remember about a job is its own (`job.engine_data`, merged key by key); any worker
process can pick a job up after another one died.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from core.errors import DomainError, Invalid
from datacenters.models import Datacenter
from jobs import layout
from jobs.logfiles import LogChunk
from jobs.models import Job, JobState, Role, WorkerState
from jobs.usage_samples import WorkerUsage


class EngineError(Exception):
    """The engine refused the job for a reason the user must fix (shown as the job's message)."""


class TransientEngineError(Exception):
    """The engine could not be reached; the task retries later and the job stays where it is."""


@dataclass
class WorkerStatus:
    role: Role
    index: int
    state: WorkerState
    host: str = ""
    pid: int | None = None
    started_at: datetime | None = None
    restarts: int = 0
    exit_code: int | None = None
    message: str = ""


@dataclass
class Observation:
    """What the engine sees of one job right now; the reconciler turns it into state."""

    state: JobState  # PENDING, RUNNING, SUCCEEDED or FAILED; QUEUED with reason PREEMPTED: stopped by the cluster
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    workers: list[WorkerStatus] = field(default_factory=list)


class Recorder(Protocol):
    """Where an engine reports what it did, as it goes; the domain (jobs.records) writes the rows."""

    def keep(self, job: Job, changes: Mapping[str, Any]) -> None:
        """Keep these engine-private keys in the job's engine data (key by key) and in `job.engine_data`."""

    def planned(self, job: Job, workers: Iterable[tuple[Role, int]]) -> None:
        """The job has these workers: their rows exist from now on (pending where new)."""

    def started(self, job: Job, status: WorkerStatus) -> None:
        """A worker's process was (re)started: its row says so (state, pid, host, start, restarts, message)."""

    def note(self, job: Job, worker: str, message: str) -> None:
        """Tell the owner something about one worker ("trainer-0") on its row."""


class ImageBuilderSupport(Protocol):
    """What an engine that can run image builders in its cluster offers images.builder (Engine.image_builder)."""

    @property
    def k8s(self) -> Any:
        """The cluster's API client (jobs.engines.kubernetes.client.Kube)."""

    def ensure_user_namespace(self, user: Any, ns: str) -> None:
        """The user's namespace, its quota and policies, made or brought up to date."""

    def ensure_registry_secret(self, user: Any, name: str, ns: str) -> None:
        """The user's registry secret `name` in their namespace (the builder pushes with it)."""

    def ensure_builder_egress(self, user: Any, registry: str, ns: str, uid: str, owner: dict[str, Any]) -> None:
        """Build `uid`'s builder pod may reach its registry; the policy is owned by `owner` (its Job)."""


class Engine(ABC):
    def __init__(self, datacenter: Datacenter) -> None:
        self.datacenter = datacenter

    def package(self, job: Job) -> Path:
        """The job's package directory on the portal's mount, checked again as the job starts."""
        try:
            return layout.resolve_package(self.datacenter, job.owner, job.spec.get("package", ""), job.name)
        except Invalid as exc:
            raise EngineError(exc.message) from None
        except DomainError as exc:  # storage not mounted right now, say: try again later
            raise TransientEngineError(exc.message) from None

    @abstractmethod
    def start(self, job: Job, recorder: Recorder) -> None:
        """Start the job; idempotent: a retry after a crash creates only what is missing."""

    @abstractmethod
    def poll(self, jobs: list[Job], recorder: Recorder) -> dict[int, Observation]:
        """Observe many jobs at once (a constant number of cluster calls, whatever their number).

        An engine that is its own controller (local) restarts a failed worker here, reporting it."""

    @abstractmethod
    def stop(self, job: Job, recorder: Recorder, grace: float | None = None) -> bool:
        """Stop everything of the job (archiving logs first); True once nothing of it runs. Idempotent.

        grace: seconds between SIGTERM and SIGKILL where the engine sends them itself (a preemption's);
        None: the engine's own (PADDLECLOUD_KILL_GRACE_SECONDS on the local engine)."""

    @abstractmethod
    def read_log(self, job: Job, worker: str, cursor: str) -> LogChunk:
        """The log text of one worker ("trainer-0", "pserver-1") after `cursor`."""

    def started(self, job: Job) -> None:
        """The job is recorded started (pending): an engine that hears its workers' events may look at once."""
        return

    def finish(self, job: Job, recorder: Recorder) -> bool:
        """Keep the logs and stop the workers of a job that is about to get its final state; True once done.

        The reconciler calls it before it writes succeeded/failed, so a job is never shown finished
        before its logs are safe (the kubernetes engine archives pod logs to the PFS here, then stops
        the pservers). Engines whose workers write their logs to the PFS themselves need nothing.
        """
        return True

    def versions(self, job_uids: list[str], complete: bool = False) -> dict[str, Hashable] | None:
        """Job uid -> a value that changes whenever anything the engine observes of the job changes, read before
        the poll that uses it; None where the engine cannot tell (then every cycle looks at every job: settled.py).
        `complete`: these are every started job of the datacenter (the engine may forget the others')."""
        return None

    def queue_positions(self, jobs: list[Job]) -> dict[str, int]:
        """Job uid -> 1-based position of those of `jobs` the cluster's own admission holds (Kueue), in the order it
        admits them (per owner's queue); {} where the portal's gate is the queue. Never raises: {} on any error."""
        return {}

    def final_workers(self, job: Job) -> list[WorkerStatus]:
        """How each worker of a stopped job ended (state, exit code, message); [] where the engine cannot tell."""
        return []

    def measured_usage(self, job: Job) -> dict[str, tuple[float | None, int | None]]:
        """What each worker of a stopped job used, by name: (cpu seconds, peak memory bytes), None where the
        engine cannot tell; {} where it measures nothing (the ledger then holds requests only)."""
        return {}

    def sample_usage(self, job: Job) -> dict[str, WorkerUsage]:
        """What each running worker of a running job uses now, by name ("trainer-0"); {} where the engine cannot
        tell. Called by jobs.worker_usage at most every few seconds per job; quick, and raises nothing but
        TransientEngineError."""
        return {}

    def worker_spans(self, job: Job) -> dict[str, tuple[datetime | None, datetime | None]]:
        """When each worker of a stopped job held its resources, by name: (start, end), None where the engine
        cannot tell (the ledger then uses the worker's started_at and the job's end); {} by default."""
        return {}

    def cleanup(self, job: Job, recorder: Recorder) -> bool:
        """Delete what is left of a finished job after the datacenter's TTL; True when done."""
        return self.stop(job, recorder)

    def reap(self) -> int:
        """Delete engine objects whose job row is gone or finished past its TTL; how many were deleted."""
        return 0

    def image_builder(self) -> ImageBuilderSupport | None:
        """What the engine offers image builds (a namespace, a registry secret, an API client); None: no builds."""
        return None

    def apply_quotas(self, users: Iterable[Any]) -> None:
        """An operator changed quotas, teams or weights: bring what the engine keeps of them (for these users, who
        have jobs here) up to date. Nothing here: the portal's scheduler reads the rows themselves."""
        return

    def revoke_registry_secret(self, username: str, name: str) -> None:
        """The user deleted registry secret `name`: remove what the engine copied of it (nothing here)."""
        return
