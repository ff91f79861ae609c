"""What an engine may offer beyond the required lifecycle (jobs.engines.base.Engine), one protocol a capability.

An engine implements the capabilities it has and nothing else: no no-op defaults on the base class, so a
capability can never be hidden by a default that came first in the class order (it once was: the Kubernetes
engine's builds and registry revocation did nothing). A caller asks for one with `isinstance(engine, Protocol)`
and does without where it is missing, as each protocol's docstring says. A new capability is a protocol here
and its methods on the engines that have it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from jobs.engines.base import WorkerStatus
from jobs.engines.usage_samples import WorkerUsage
from jobs.models import Job


@runtime_checkable
class WorkerEvents(Protocol):
    """The engine hears its workers' events and may look at a job at once once it is recorded started."""

    def started(self, job: Job) -> None: ...


@runtime_checkable
class ChangeVersions(Protocol):
    """Job uid -> a value that changes whenever anything the engine observes of the job changes, read before the
    poll that uses it; None where it cannot tell now. Without it every full cycle looks at every job (settled.py).
    `complete`: these are every started job of the datacenter (the engine may forget the others')."""

    def versions(self, job_uids: list[str], complete: bool = False) -> dict[str, Hashable] | None: ...


@runtime_checkable
class QueueVisibility(Protocol):
    """Job uid -> 1-based position of those of `jobs` the cluster's own admission holds (Kueue), in the order it
    admits them; {} where the portal's gate is the queue. Never raises: {} on any error. Without it: {}."""

    def queue_positions(self, jobs: list[Job]) -> dict[str, int]: ...


@runtime_checkable
class PreemptionCosts(Protocol):
    """The cluster's own admission chooses victims (Kueue): it is told each running job's priority boost (job uid ->
    boost, jobs.scheduling.preemption_cost) and writes those that changed; how many it wrote. Raises
    TransientEngineError where the cluster is away. Without it the portal's scheduler chooses victims itself."""

    def set_preemption_costs(self, costs: Mapping[str, int]) -> int: ...


@runtime_checkable
class FinalWorkers(Protocol):
    """How each worker of a stopped job ended (state, exit code, message); [] where it cannot tell."""

    def final_workers(self, job: Job) -> list[WorkerStatus]: ...


@runtime_checkable
class UsageMeter(Protocol):
    """What each worker of a stopped job used, by name: (cpu seconds, peak memory bytes), None where the engine
    cannot tell. Without it the ledger holds requests only."""

    def measured_usage(self, job: Job) -> dict[str, tuple[float | None, int | None]]: ...


@runtime_checkable
class WorkerSpans(Protocol):
    """When each worker of a stopped job held its resources, by name: (start, end), None where it cannot tell.
    Without it the ledger uses each worker's started_at and the job's end."""

    def worker_spans(self, job: Job) -> dict[str, tuple[datetime | None, datetime | None]]: ...


@runtime_checkable
class UsageSampler(Protocol):
    """What each running worker of a running job uses now, by name ("trainer-0"); {} where it cannot tell. Called
    by jobs.follow.worker_usage at most every few seconds per job; quick, raises nothing but TransientEngineError."""

    def sample_usage(self, job: Job) -> dict[str, WorkerUsage]: ...


@runtime_checkable
class Reaper(Protocol):
    """Delete engine objects whose job row is gone or finished past its TTL; how many were deleted."""

    def reap(self) -> int: ...


@runtime_checkable
class QuotaSync(Protocol):
    """An operator changed quotas, teams or weights: bring what the engine keeps of them (for these users, who have
    jobs here) up to date. Without it there is nothing to sync: the portal's scheduler reads the rows themselves."""

    def apply_quotas(self, users: Iterable[Any]) -> None: ...


@runtime_checkable
class RegistryLogins(Protocol):
    """The user deleted registry secret `name`: remove what the engine copied of it (into its clusters)."""

    def revoke_registry_secret(self, username: str, name: str) -> None: ...


@dataclass(frozen=True)
class BuilderSpec:
    """One image build as the portal asks an engine for it (images.builder): what to build and for whom."""

    uid: str
    owner: Any  # the user: their namespace, quota and registry login
    registry: str  # the name of the owner's registry login the builder pushes with
    package: str  # the package folder, a logical path beneath the owner's home
    image: str  # where it pushes the image
    dockerfile: str


@dataclass(frozen=True)
class BuildStatus:
    """What a builder says: `done` with `succeeded` (and the image's digest), or still going with a `message`."""

    done: bool = False
    succeeded: bool = False
    message: str = ""
    digest: str = ""


@dataclass(frozen=True)
class Builder:
    """A builder the engine found: its build, where it runs, and when it was made (None: unknown)."""

    uid: str
    namespace: str
    name: str
    made: datetime | None


class BuilderLook(Protocol):
    """One look at every builder of the datacenter (a constant number of calls, whatever their number)."""

    def status(self, uid: str, namespace: str, name: str, age: float) -> BuildStatus | None:
        """A build's status (`age`: seconds since it started building); None where its builder is gone."""

    def builders(self) -> list[Builder]: ...


@runtime_checkable
class ImageBuilds(Protocol):
    """The engine runs image builders (images.builder keeps the build rows, their states and logs). Without it a
    datacenter builds no images."""

    def start_builder(self, spec: BuilderSpec) -> tuple[str, str]:
        """Start the build's builder (idempotent: a retry finds what is there); its (namespace, name).
        EngineError where the cluster refuses it."""

    def look_at_builders(self) -> BuilderLook: ...

    def builder_log(self, namespace: str, uid: str) -> str:
        """The builder's whole log so far; "" where it has none (never started)."""

    def builder_error(self, log: str) -> str:
        """The line of a builder's log that says why it failed; "" where none does."""

    def delete_builder(self, namespace: str, name: str) -> None:
        """Delete a builder and everything of it (done or not); nothing where it is gone."""
