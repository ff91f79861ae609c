"""An engine for a datacenter, from the engine table beside `Datacenter.engine` (datacenters/models.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.module_loading import import_string

from datacenters.models import ENGINES

if TYPE_CHECKING:
    from datacenters.models import Datacenter
    from jobs.engines.base import Engine


def engine_for(datacenter: Datacenter) -> Engine:
    engine: Engine = import_string(ENGINES[datacenter.engine].engine)(datacenter)
    return engine
