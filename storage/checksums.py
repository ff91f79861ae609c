"""The checksum uploads are checked with: XXH3-128, written 'xxh3_128:<32 hex digits>'."""

from __future__ import annotations

import re
from typing import Any

import xxhash

from core.errors import Invalid

CHECKSUM_ALGORITHM = "xxh3_128"
_CHECKSUM = re.compile(r"^(?:xxh3_128:)?([0-9a-fA-F]{32})$")


def new_hasher() -> Any:
    return xxhash.xxh3_128()


def parse_checksum(value: Any, field: str) -> str:
    """'xxh3_128:<32 hex digits>' (the prefix may be left out) -> lowercase hex."""
    match = _CHECKSUM.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise Invalid(
            f"must be an XXH3-128 checksum: 'xxh3_128:' followed by 32 hex digits (got {str(value)[:80]!r})", field
        )
    return match.group(1).lower()


def format_checksum(digest: str) -> str:
    return f"{CHECKSUM_ALGORITHM}:{digest}"
