"""System checks for jobs: datacenters whose local jobs would run without the sandbox."""

from __future__ import annotations

from typing import Any

from django.core.checks import Warning, register
from django.db import DatabaseError

from datacenters.models import Datacenter, Engine


@register()
def unsandboxed_datacenters(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    try:
        names = list(
            Datacenter.objects.filter(engine=Engine.LOCAL, run_without_sandbox=True).values_list("name", flat=True)
        )
    except DatabaseError:
        return []  # not migrated yet: nothing to warn about
    return [
        Warning(
            f"datacenter {name!r} runs local jobs without the sandbox where bubblewrap cannot start",
            hint="Jobs there run as the worker's OS user and see its files: untick 'run without sandbox' "
            "unless every user of it is trusted with that account.",
            id="paddlecloud.W010",
        )
        for name in names
    ]
