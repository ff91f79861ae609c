"""Scheduling strategies: the portal scheduler's decisions as named plug-ins, chosen per datacenter.

A policy is three strategies (`Strategies`): the **order** waiting jobs go in (order.py), the **backfill** rule, what
a job blocked by capacity holds against those after it (backfill.py), and the **victims** a waiting job of higher
priority stops (victims.py). Each is a small class registered here by name, with the settings it takes; an
operator picks the names and settings per datacenter (jobs.models.SchedulingPolicy, in the admin), and `build`
checks them, naming the field and the rule. A new strategy is a class in its module and a line in its registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.scheduling.strategies.backfill import Backfill, Conservative, Greedy, Reserve
from jobs.scheduling.strategies.order import FairShare, Fifo, Order
from jobs.scheduling.strategies.settings import SettingError, Settings
from jobs.scheduling.strategies.victims import LeastLoss, Never, VictimChoice

ORDERS: dict[str, Callable[[Settings], Order]] = {"fair-share": FairShare.of, "fifo": Fifo.of}
BACKFILLS: dict[str, Callable[[Settings], Backfill]] = {
    "reserve": Reserve.of,
    "conservative": Conservative.of,
    "greedy": Greedy.of,
}
VICTIMS: dict[str, Callable[[Settings], VictimChoice]] = {"least-loss": LeastLoss.of, "never": Never.of}
KINDS: dict[str, Mapping[str, Callable[[Settings], Any]]] = {"order": ORDERS, "backfill": BACKFILLS, "victims": VICTIMS}


class StrategyError(ValueError):
    """A name or a setting no strategy takes; `field` is the one to fix."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class Strategies:
    order: Order
    backfill: Backfill
    victims: VictimChoice


def _pick(kind: str, name: str, settings: Settings) -> Any:
    registry = KINDS[kind]
    if name not in registry:
        raise StrategyError(f"{name!r} is no {kind} strategy; choose one of {', '.join(sorted(registry))}", kind)
    try:
        return registry[name](settings)
    except SettingError as exc:
        raise StrategyError(str(exc), "settings") from None


def build(order: str, backfill: str, victims: str, settings: Mapping[str, Any] | None = None) -> Strategies:
    """The named strategies with their settings; StrategyError naming the field where a name or setting is wrong
    (a setting none of the three takes included)."""
    try:
        values = Settings(settings)
    except SettingError as exc:
        raise StrategyError(str(exc), "settings") from None
    chosen = Strategies(
        _pick("order", order, values), _pick("backfill", backfill, values), _pick("victims", victims, values)
    )
    try:
        values.refuse_unread()
    except SettingError as exc:
        raise StrategyError(str(exc), "settings") from None
    return chosen


DEFAULT = build("fair-share", "reserve", "least-loss")
