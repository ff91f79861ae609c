"""Validators shared by models and serializers: DNS names and Kubernetes quantities."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from kubernetes.utils import parse_quantity

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
        shown = ", ".join(repr(c) for c in bad)
        raise ValidationError(f"may contain only a-z, 0-9 and '-' (found {shown})", code="invalid")
    if not _DNS_LABEL.match(value):
        raise ValidationError("must start and end with a letter or digit", code="invalid")


def parse_quantity_or_error(value: str, field: str, examples: str) -> Decimal:
    """Parse a Kubernetes quantity, or raise with the bad value quoted and examples to use."""
    try:
        quantity = parse_quantity(value)
    except (ValueError, TypeError, InvalidOperation):
        raise ValidationError(f"{field} {value!r} is not a quantity; use {examples}", code="invalid") from None
    if quantity < 0:
        raise ValidationError(f"{field} {value!r} must not be negative", code="min_value")
    return Decimal(quantity)


def validate_cpu_quantity(value: str) -> None:
    parse_quantity_or_error(value, "cpu", "a number of cores such as 2, 0.5 or 500m")


def validate_memory_quantity(value: str) -> None:
    parse_quantity_or_error(value, "memory", "1Gi, 1G or 512Mi")


def validate_storage_quantity(value: str) -> None:
    parse_quantity_or_error(value, "storage", "100Gi, 1Ti or 500G")
