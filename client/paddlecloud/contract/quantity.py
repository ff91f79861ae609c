"""Kubernetes quantities ('500m', '2Gi', '1e3') parsed within bounds: the one parser of portal and client.

A value is checked by its length, its shape and its exponent before any arithmetic, so "1e999999999"
is refused at once instead of being expanded into a billion-digit number. The caps are far above any
cluster and far below anything costly to compute with:

    cpu               at most 1000000 cores (1e6)
    memory, storage   at most 1Ei (2**60 bytes)
    gpu               at most 1024 (a whole number; quotas)
    text              at most 32 characters; exponents between -40 and 40

Non-finite values (NaN, sNaN, Infinity, inf) and negative amounts are refused. A message quotes at
most the first 32 characters of a bad value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Context, Decimal, localcontext

MAX_LENGTH = 32  # "123456789012345678Ki" is 20; nothing a person types is longer
MAX_EXPONENT = 40  # with at most 32 digits, every allowed value is exact at 120 digits of precision
QUOTE_LENGTH = 32
MAX_GPUS = 1024

_SHAPE = re.compile(
    # As Kubernetes writes them: a decimal number, then an exponent or a suffix (not both).
    r"(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?:[eE](?P<exponent>[+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?",
    re.ASCII,  # only 0-9 are digits: Decimal() would also take other scripts' digits
)
_NON_FINITE = re.compile(r"[+-]?(?:s?nan|inf|infinity)", re.IGNORECASE)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of 10


class QuantityError(ValueError):
    """A value that is not a quantity within its kind's bounds; str() is the message for people."""


@dataclass(frozen=True)
class Kind:
    """What a quantity measures: its name in messages, its cap, and examples of good values."""

    name: str
    cap: Decimal
    cap_text: str
    examples: str


CPU = Kind("cpu", Decimal(10**6), "1000000 cores (1e6)", "a number of cores such as 2, 0.5 or 500m")
MEMORY = Kind("memory", Decimal(2**60), "1Ei", "1Gi, 1G or 512Mi")
STORAGE = Kind("storage", Decimal(2**60), "1Ei", "100Gi, 1Ti or 500G")


def quote(value: object, limit: int = QUOTE_LENGTH) -> str:
    """A user's value as every message shows it (portal and client): repr() of at most `limit` characters, then '…'."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return repr(text[:limit]) + "…"
    return repr(text)


def parse(value: object, kind: Kind, field: str | None = None) -> Decimal:
    """The amount a quantity stands for (cores or bytes); QuantityError names the rule broken.

    `field` starts the message ("memory '1GB' is not a quantity; ...") when given.
    """
    start = f"{field} {quote(value)}" if field else quote(value)
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        raise QuantityError(f"{start} is not a quantity; use {kind.examples}")
    text = value.strip() if isinstance(value, str) else str(value)
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"{start} is too long: a quantity has at most {MAX_LENGTH} characters")
    if _NON_FINITE.fullmatch(text):
        raise QuantityError(f"{start} is not a finite number; use {kind.examples}")
    match = _SHAPE.fullmatch(text)
    if match is None:
        raise QuantityError(f"{start} is not a quantity; use {kind.examples}")
    exponent = int(match["exponent"] or 0)  # at most 31 digits: cheap, never a huge number
    if abs(exponent) > MAX_EXPONENT:
        raise QuantityError(
            f"{start} has an exponent outside -{MAX_EXPONENT}..{MAX_EXPONENT}; {kind.name} is at most {kind.cap_text}"
        )
    suffix = match["suffix"] or ""
    # Every allowed value has at most 32 digits scaled by 10**±58: exact at this precision.
    with localcontext(Context(prec=120)):
        amount = Decimal(match["number"]).scaleb(exponent + _DECIMAL.get(suffix, 0))
        if suffix in _BINARY:
            amount *= Decimal(1024) ** _BINARY[suffix]
    if match["sign"] == "-" and amount != 0:
        raise QuantityError(f"{start} must not be negative")
    if amount > kind.cap:
        raise QuantityError(f"{start} is too large: {kind.name} is at most {kind.cap_text}")
    return amount


def problem(value: object, kind: Kind, field: str | None = None) -> str | None:
    """What is wrong with a quantity, or None."""
    try:
        parse(value, kind, field)
    except QuantityError as exc:
        return str(exc)
    return None


def cores(value: object, field: str = "cpu") -> Decimal:
    """CPU cores as an exact decimal."""
    return parse(value, CPU, field)


def byte_count(value: object, kind: Kind = MEMORY, field: str | None = None) -> int:
    """Bytes, rounded up to a whole byte as Kubernetes does ('0.5' is 1 byte)."""
    return math.ceil(parse(value, kind, field or kind.name))
