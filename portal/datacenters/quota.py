"""Effective quota (user override, else datacenter default) and usage computed by the apps that use it.

Usage is never typed in: `jobs` reports compute in use and `storage` reports bytes and files, each by
registering a provider in its AppConfig.ready(), so this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from portal.datacenters.models import Datacenter, Quota


@dataclass(frozen=True)
class Amounts:
    cpu: Decimal = Decimal(0)  # cores
    memory: int = 0  # bytes
    gpu: int = 0
    jobs: int = 0  # concurrent active jobs
    storage: int = 0  # bytes
    storage_files: int = 0

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cpu"] = float(self.cpu)
        return data


UsageProvider = Callable[[Any, Datacenter], Amounts]
_providers: list[UsageProvider] = []


def register_usage_provider(provider: UsageProvider) -> None:
    if provider not in _providers:
        _providers.append(provider)


def limits(user: Any, datacenter: Datacenter) -> Amounts:
    override = Quota.objects.filter(user=user, datacenter=datacenter).first()

    def pick(name: str, default: Any) -> Any:
        value = getattr(override, name, None) if override else None
        return default if value in (None, "") else value

    return Amounts(
        cpu=Decimal(parse_quantity(pick("cpu", datacenter.default_cpu))),
        memory=int(parse_quantity(pick("memory", datacenter.default_memory))),
        gpu=int(pick("gpu", datacenter.default_gpu)),
        jobs=int(pick("jobs", datacenter.default_jobs)),
        storage=int(parse_quantity(pick("storage", datacenter.default_storage))),
        storage_files=int(pick("storage_files", datacenter.default_storage_files)),
    )


def usage(user: Any, datacenter: Datacenter) -> Amounts:
    total = Amounts()
    for provider in _providers:
        total = total + provider(user, datacenter)
    return total


def report(user: Any, datacenter: Datacenter) -> dict[str, Any]:
    return {
        "datacenter": datacenter.name,
        "limits": limits(user, datacenter).as_json(),
        "usage": usage(user, datacenter).as_json(),
    }
