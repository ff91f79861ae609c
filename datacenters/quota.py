"""Effective quota (user override, else datacenter default) and usage computed by the apps that use it.

Usage is never typed in: `jobs` reports compute in use and `storage` reports bytes and files, each by
registering a provider in its AppConfig.ready(), so this module imports neither.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from decimal import Decimal
from typing import Any

from paddlecloud.contract import quantity

from datacenters.models import Datacenter, Quota

log = logging.getLogger(__name__)


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


def _amount(override: Quota | None, datacenter: Datacenter, name: str, kind: quantity.Kind) -> Decimal:
    """A quantity limit: the user's override, else the datacenter's default.

    A value saved before quantities were bounded (NaN, 1e999999) must not break the quota page or
    submit: a bad override counts as the datacenter's default, a bad default as zero (nothing may be
    used until an operator fixes it). Both are logged for the operators.
    """
    value = getattr(override, name, "") if override else ""
    if value:
        try:
            return quantity.parse(value, kind, name)
        except quantity.QuantityError as exc:
            log.warning("quota of %s in %s: ignoring the saved %s and using the default: %s",
                        override.user, datacenter.name, name, exc)  # type: ignore[union-attr]
    default = getattr(datacenter, f"default_{name}")
    try:
        return quantity.parse(default, kind, name)
    except quantity.QuantityError as exc:
        log.warning("datacenter %s: its default %s quota is invalid, so it counts as 0: %s", datacenter.name,
                    name, exc)
        return Decimal(0)


def limits(user: Any, datacenter: Datacenter) -> Amounts:
    return limits_of(Quota.objects.filter(user=user, datacenter=datacenter).first(), datacenter)


def limits_of(override: Quota | None, datacenter: Datacenter) -> Amounts:
    """The limits of a user whose override row (or None: the datacenter's defaults) the caller already read."""

    def pick(name: str, default: Any) -> Any:
        value = getattr(override, name, None) if override else None
        return default if value in (None, "") else value

    return Amounts(
        cpu=_amount(override, datacenter, "cpu", quantity.CPU),
        memory=math.ceil(_amount(override, datacenter, "memory", quantity.MEMORY)),
        gpu=int(pick("gpu", datacenter.default_gpu)),
        jobs=int(pick("jobs", datacenter.default_jobs)),
        storage=math.ceil(_amount(override, datacenter, "storage", quantity.STORAGE)),
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
