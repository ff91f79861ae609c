"""Numbers as every page writes them: thousands grouped (`1,000,000`) and sizes in binary units (`512.0 MiB`),
the units of the specs (`512Mi`) and of the charts (static/js/usage.js)."""

from __future__ import annotations

from decimal import Decimal

from django import template

register = template.Library()

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


@register.filter
def thousands(value: int | float | Decimal | str | None) -> str:
    """1000000 -> 1,000,000; 2.5 -> 2.5; anything else as it is."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return str(value)
    if number == number.to_integral_value():
        return f"{int(number):,}"
    return f"{number:,f}".rstrip("0")


@register.filter
def binary_size(value: int | float | None) -> str:
    """Bytes in the largest binary unit below them: 536870912 -> 512.0 MiB; 900 -> 900 B."""
    if value is None or isinstance(value, bool):
        return ""
    size, unit = float(value), 0
    while abs(size) >= 1024 and unit < len(UNITS) - 1:
        size /= 1024
        unit += 1
    return f"{int(size)} B" if unit == 0 else f"{size:.1f} {UNITS[unit]}"
