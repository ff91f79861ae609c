"""Registry secrets a user deleted while their jobs used them: the namespace's copy is blanked, and a pending
job says why its image may not come (the Kubernetes engine's poll calls this)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from jobs.engines.base import Observation, Recorder
from jobs.engines.kubernetes import namespaces
from jobs.models import Job, JobState
from registry.models import RegistrySecret


def check_registry_secrets(
    jobs: list[Job],
    observations: dict[int, Observation],
    recorder: Recorder,
    ensure_current: Callable[..., Any],  # the engine's: create or update an object of the datacenter
) -> None:
    """Jobs whose registry secret the user deleted: blank the namespace's copy once (the portal may
    not delete Secrets, see deploy/base/rbac.yaml; the deleted login must not pull anything any more) and,
    while the job still waits for its pods, say on the job why its image may not come."""
    named = [job for job in jobs if job.spec.get("registry")]
    if not named:
        return
    existing = set(
        RegistrySecret.objects.filter(
            owner_id__in={job.owner_id for job in named}, name__in={job.spec["registry"] for job in named}
        ).values_list("owner_id", "name")
    )
    for job in named:
        name = job.spec["registry"]
        if (job.owner_id, name) in existing:
            continue
        ns = str((job.engine_data or {}).get("namespace") or "")
        if ns and not (job.engine_data or {}).get("registry_revoked"):
            body = namespaces.revoked_registry_secret(ns, name, job.datacenter.name, job.owner.get_username())
            ensure_current("Secret", body, readable=False)
            recorder.keep(job, {"registry_revoked": True})
        seen = observations.get(job.pk)
        if seen is not None and seen.state == JobState.PENDING:
            note = (
                f"registry secret {name!r} was deleted while the job was pending: its image cannot be "
                "pulled with it (add the secret again and submit the job again)"
            )
            observations[job.pk] = replace(seen, message=f"{note}; {seen.message}" if seen.message else note)
