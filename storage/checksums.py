"""The checksum uploads are checked with: XXH3-128, written as the client's contract says (contract.checksum)."""

from __future__ import annotations

from typing import Any

import xxhash
from paddlecloud.contract import checksum

from core.errors import Invalid


def new_hasher() -> Any:
    return xxhash.xxh3_128()


def parse_checksum(value: Any, field: str) -> str:
    """'xxh3_128:<32 hex digits>' (the prefix may be left out) -> lowercase hex."""
    digest = checksum.hex_of(value) if isinstance(value, str) else None
    if digest is None:
        raise Invalid(
            f"must be an XXH3-128 checksum: '{checksum.ALGORITHM}:' followed by 32 hex digits "
            f"(got {str(value)[:80]!r})",
            field,
        )
    return digest


def format_checksum(digest: str) -> str:
    return checksum.written(digest)
