"""The local engine's rules: a job's `image` names one of the datacenter's runtimes, and its GPUs exist."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import psutil

from core.errors import Invalid
from datacenters.models import Datacenter
from jobs.engines.local import runtimes
from jobs.engines.local.gpus import detect
from jobs.engines.rules import EngineRules
from jobs.models import Runtime


class LocalRules(EngineRules):
    @classmethod
    def check_spec(cls, datacenter: Datacenter, spec: dict[str, Any]) -> None:
        image = spec.get("image") or ""
        named = Runtime.objects.filter(datacenter=datacenter, name=image)
        if image and image != runtimes.DEFAULT_RUNTIME and not named.exists():
            choices = ", ".join(runtimes.names(datacenter))
            raise Invalid(
                f"{image!r} is not a runtime of datacenter {datacenter.name}; choose one of: {choices}", "image"
            )
        wanted = int(spec.get("parallelism") or 1) * int(spec.get("gpu") or 0)
        if wanted > len(datacenter.gpus):
            raise Invalid(
                f"the job needs {wanted} GPUs but datacenter {datacenter.name} has {len(datacenter.gpus)}", "gpu"
            )

    @classmethod
    def prepare_new(cls, datacenter: Datacenter) -> None:
        if not datacenter.gpus:
            datacenter.gpus = detect()  # a new local datacenter starts with this host's GPUs

    @classmethod
    def host_report(cls) -> str:
        from jobs.engines.local.world import host_report  # noqa: PLC0415 - only the admin page asks; it runs probes

        return host_report()

    @classmethod
    def detect_gpus(cls) -> list[str]:
        return detect()

    @classmethod
    def host_capacity(cls, datacenter: Datacenter) -> tuple[Decimal | None, int | None, int | None]:
        """The host's cores (those this process may run on), memory and the datacenter's GPUs: no overcommit."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return Decimal(cores), int(psutil.virtual_memory().total), len(datacenter.gpus or [])
