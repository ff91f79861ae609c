"""Template filters of the job pages: elapsed time, usage percentages, metric values, epoch times, what an
estimate rests on, reasons in words and how far off a moment is."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django import template
from django.utils import timezone
from django.utils.timesince import timeuntil

from jobs.scheduling import replay

register = template.Library()

BASIS_WORDS = {
    replay.NOW: "it fits now",
    replay.PROGRESS: "from the running jobs' progress",
    replay.HISTORY: "from earlier runs of the same names",
    replay.AVERAGE: "from the average run here",
}


@register.filter
def estimate_basis(basis: str | None) -> str:
    """What an estimate rests on, in words (jobs.scheduling.replay.BASES)."""
    return BASIS_WORDS.get(basis or "", "nothing to estimate from")


@register.filter
def elapsed(value: timedelta | None) -> str:
    """1h 02m 03s, 4m 05s or 6s."""
    if value is None:
        return ""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {seconds:02d}s"
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


@register.filter
def percent(used: int | float | Decimal | str | None, limit: int | float | Decimal | str | None) -> int:
    """used as a whole percentage of limit, 0 to 100 (a bar's value)."""
    try:
        used_f, limit_f = float(used or 0), float(limit or 0)
    except (TypeError, ValueError):
        return 0
    if limit_f <= 0:
        return 100 if used_f > 0 else 0
    return max(0, min(100, round(100 * used_f / limit_f)))


@register.filter
def eta(value: int | None) -> str:
    """An estimate in seconds, no more precise than it is: 45s, 12m, 1h 30m, 2d 4h; "" when unknown."""
    if value is None:
        return ""
    seconds = max(0, int(value))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if hours < 1:
        return f"{minutes}m"
    return f"{hours}h {minutes % 60}m" if days < 1 else f"{days}d {hours % 24}h"


@register.filter
def whole_percent(fraction: float | None) -> int:
    """A fraction 0 to 1 as a whole percentage, floored (99.9 % is not shown done) and clamped."""
    return max(0, min(100, int(100 * float(fraction or 0))))


@register.filter
def significant(value: object) -> str:
    """A metric's value in 6 significant digits (1e-07 stays visible); "–" where there is none."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "–" if value is None else str(value)
    return f"{value:.6g}"


@register.filter
def epoch(value: float | None) -> datetime | None:
    """Seconds since the epoch as an aware datetime (for timesince)."""
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|$)|[A-Z]?[a-z]+|\d+")
_ACRONYMS = {"OOM", "GPU", "CPU", "PS"}


@register.filter
def reason_words(reason: str | None, state: str = "") -> str:
    """A reason code as words (`WaitingForCapacity` -> `waiting for capacity`, `OOMKilled` -> `OOM killed`);
    "" where it only repeats the state (`killed` / `Killed`)."""
    if not reason or reason.lower() == (state or "").lower():
        return ""
    words = _WORD.findall(reason) or [reason]
    return " ".join(word if word in _ACRONYMS else word.lower() for word in words).replace("back off", "back-off")


@register.filter
def from_now(moment: datetime | None) -> str:
    """"in about 12 minutes"; "in under a minute" where timeuntil would say "0 minutes"; "" when unknown."""
    if moment is None:
        return ""
    if (moment - timezone.now()).total_seconds() < 60:
        return "in under a minute"
    return f"in about {timeuntil(moment)}"
