"""Validators shared by models and serializers: DNS names and Kubernetes quantities (bounded).

Quantities are parsed by the client's contract (paddlecloud.contract.quantity), the same parser
paddlectl uses, so a value is refused by its shape, length and cap before any arithmetic.
"""

from __future__ import annotations

import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from paddlecloud.contract import quantity

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_dns_label(value: str, max_length: int = 63) -> None:
    """Kubernetes DNS-1123 label: the rule named in the message, not just 'invalid'."""
    if not value:
        raise ValidationError("must not be empty", code="required")
    if len(value) > max_length:
        raise ValidationError(f"must be at most {max_length} characters (got {len(value)})", code="max_length")
    if value != value.lower():
        raise ValidationError("must be lowercase (a-z, 0-9 and '-')", code="invalid")
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c == "-"))})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:10])
        raise ValidationError(f"may contain only a-z, 0-9 and '-' (found {shown})", code="invalid")
    if not _DNS_LABEL.match(value):
        raise ValidationError("must start and end with a letter or digit", code="invalid")


def parse_quantity_or_error(value: str, kind: quantity.Kind, field: str | None = None) -> Decimal:
    """The amount of a quantity, or a ValidationError naming the rule (the bad value quoted briefly)."""
    try:
        return quantity.parse(value, kind, field or kind.name)
    except quantity.QuantityError as exc:
        raise ValidationError(str(exc), code="invalid") from None


def validate_cpu_quantity(value: str) -> None:
    parse_quantity_or_error(value, quantity.CPU)


def validate_memory_quantity(value: str) -> None:
    parse_quantity_or_error(value, quantity.MEMORY)


def validate_storage_quantity(value: str) -> None:
    parse_quantity_or_error(value, quantity.STORAGE)
