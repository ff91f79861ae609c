"""Numbers as every page writes them: thousands grouped (`1,000,000`) and sizes in binary units (`512.0 MiB`),
the units of the specs (`512Mi`) and of the charts (static/js/usage.js)."""

from __future__ import annotations

from decimal import Decimal

from django import template
from paddlecloud.contract import units

register = template.Library()

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
    """Bytes in binary units, as the storage reports write them (paddlecloud.contract.units): 512.0 MiB, 900 B."""
    if value is None or isinstance(value, bool):
        return ""
    return units.human_bytes(int(value))
