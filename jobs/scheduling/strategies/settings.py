"""A policy's settings as its strategies read them: each setting bounded and checked where it is read, and any
setting that no chosen strategy read refused (a typo must not pass silently)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_SETTINGS = 20


class SettingError(ValueError):
    """A setting out of its rule; the message names it and the rule."""


class Settings:
    def __init__(self, values: Mapping[str, Any] | None) -> None:
        if values is not None and not isinstance(values, Mapping):
            raise SettingError("settings: must be an object of setting names to values")
        self.values = dict(values or {})
        if len(self.values) > MAX_SETTINGS:
            raise SettingError(f"settings: at most {MAX_SETTINGS} settings")
        self.read: set[str] = set()

    def seconds(self, name: str, default: float, most: float) -> float:
        """A number of seconds from 0 to `most` (`default` where it is not set)."""
        self.read.add(name)
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
            raise SettingError(f"settings.{name}: must be a number of seconds from 0 to {most:g}")
        return float(value)

    def refuse_unread(self) -> None:
        unknown = sorted(set(self.values) - self.read)
        if unknown:
            taken = ", ".join(sorted(self.read)) or "none"
            raise SettingError(f"settings.{unknown[0]}: no chosen strategy takes it; they take: {taken}")
