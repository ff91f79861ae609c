"""The engine interface: the lifecycle every engine (local processes, Kubernetes) offers the job tasks.

Required: start, poll, stop, finish, cleanup and read_log. Anything more an engine may offer (usage samples,
queue positions, image builds, registry logins, quota sync, ...) is a capability of its own, a protocol in
jobs.engines.capabilities that callers ask for; the base class holds no defaults for them.

Engines report, the domain records: an engine writes no Job or Worker row. `poll` returns what it saw
(an Observation per job); what an engine did and must not forget (a process it spawned, the ports it
chose, a stop it asked for) it reports, at once and before it acts on it, to the `Recorder` the caller
hands it (jobs.follow.records writes it), so a worker process that dies mid-start leaves no stranger behind.
What an engine must remember about a job is its own (`job.engine_data`, merged key by key); any worker
process can pick a job up after another one died.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from core.errors import DomainError, Invalid
from datacenters.models import Datacenter
from jobs.files import layout
from jobs.files.logfiles import LogChunk
from jobs.models import Job, JobState, Role, WorkerState


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
    """Where an engine reports what it did, as it goes; the domain (jobs.follow.records) writes the rows."""

    def keep(self, job: Job, changes: Mapping[str, Any]) -> None:
        """Keep these engine-private keys in the job's engine data (key by key) and in `job.engine_data`."""

    def planned(self, job: Job, workers: Iterable[tuple[Role, int]]) -> None:
        """The job has these workers: their rows exist from now on (pending where new)."""

    def started(self, job: Job, status: WorkerStatus) -> None:
        """A worker's process was (re)started: its row says so (state, pid, host, start, restarts, message)."""

    def note(self, job: Job, worker: str, message: str) -> None:
        """Tell the owner something about one worker ("trainer-0") on its row."""


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

    @abstractmethod
    def finish(self, job: Job, recorder: Recorder) -> bool:
        """Keep the logs and stop the workers of a job that is about to get its final state; True once done.

        The reconciler calls it before it writes succeeded/failed, so a job is never shown finished
        before its logs are safe (the kubernetes engine archives pod logs to the PFS here, then stops
        the pservers). Engines whose workers write their logs to the PFS themselves need nothing.
        """

    @abstractmethod
    def cleanup(self, job: Job, recorder: Recorder) -> bool:
        """Delete what is left of a finished job after the datacenter's TTL; True when done."""

    def held_open_bytes(self, owner: Any) -> int:
        """Bytes the owner's running jobs keep in files they deleted on the PFS (the storage quota counts them);
        0 where the engine cannot see its jobs' open files (pods on other nodes)."""
        return 0

    def layer_bytes(self, owner: Any) -> int:
        """Bytes the owner's jobs wrote outside their home into what the engine keeps for them (the local engine:
        their requirement layers); the storage quota counts them. 0 where the engine keeps nothing such."""
        return 0
