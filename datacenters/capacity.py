"""A datacenter's capacity: what all its running jobs together may hold; blank fields ask the engine (the host's)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from decimal import Decimal

from paddlecloud.contract import quantity

from datacenters.models import Datacenter, rules_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Capacity:
    cpu: Decimal | None  # cores; None: unbounded
    memory: int | None  # bytes
    gpu: int | None

    def as_json(self) -> dict[str, float | int | None]:
        return {"cpu": None if self.cpu is None else float(self.cpu), "memory": self.memory, "gpu": self.gpu}


def _parsed(value: str, kind: quantity.Kind, name: str, datacenter: Datacenter) -> Decimal | None:
    try:
        return quantity.parse(value, kind, name)
    except quantity.QuantityError as exc:  # saved before the field was validated: nothing may start
        log.warning("datacenter %s: its capacity %s is invalid, so it counts as 0: %s", datacenter.name, name, exc)
        return Decimal(0)


def capacity(datacenter: Datacenter) -> Capacity:
    host_cpu, host_memory, host_gpu = rules_for(datacenter.engine).host_capacity(datacenter)
    cpu = _parsed(datacenter.capacity_cpu, quantity.CPU, "cpu", datacenter) if datacenter.capacity_cpu else host_cpu
    memory = (
        _parsed(datacenter.capacity_memory, quantity.MEMORY, "memory", datacenter)
        if datacenter.capacity_memory
        else host_memory
    )
    gpu = datacenter.capacity_gpu if datacenter.capacity_gpu is not None else host_gpu
    return Capacity(cpu, None if memory is None else math.floor(memory), gpu)
