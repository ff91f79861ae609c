"""What an engine may offer beyond the required lifecycle (jobs.engines.base.Engine), one protocol a capability.

An engine implements the capabilities it has and nothing else: no no-op defaults on the base class, so a
capability can never be hidden by a default that came first in the class order (it once was: the Kubernetes
engine's builds and registry revocation did nothing). A caller asks for one with `isinstance(engine, Protocol)`
and does without where it is missing, as each protocol's docstring says. A new capability is a protocol here
and its methods on the engines that have it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
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


@runtime_checkable
class ImageBuilds(Protocol):
    """The engine runs image builders in its cluster (images.builder): the user's namespace, its registry secret, the
    builder's egress, and the cluster's API client. Without it a datacenter builds no images."""

    @property
    def k8s(self) -> Any:
        """The cluster's API client (jobs.engines.kubernetes.client.Kube)."""

    def ensure_user_namespace(self, user: Any, ns: str) -> None:
        """The user's namespace, its quota and policies, made or brought up to date."""

    def ensure_registry_secret(self, user: Any, name: str, ns: str) -> None:
        """The user's registry secret `name` in their namespace (the builder pushes with it)."""

    def ensure_builder_egress(self, user: Any, registry: str, ns: str, uid: str, owner: dict[str, Any]) -> None:
        """Build `uid`'s builder pod may reach its registry; the policy is owned by `owner` (its Job)."""
