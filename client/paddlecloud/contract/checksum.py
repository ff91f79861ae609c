"""How an upload's checksum is written on the wire: XXH3-128 as 'xxh3_128:<32 hex digits>'."""

from __future__ import annotations

import re

ALGORITHM = "xxh3_128"
_WRITTEN = re.compile(rf"^(?:{ALGORITHM}:)?([0-9a-fA-F]{{32}})$")


def written(hexdigest: str) -> str:
    """The checksum as it is sent: the algorithm's name, a colon, the hex digest."""
    return f"{ALGORITHM}:{hexdigest}"


def hex_of(value: str) -> str | None:
    """The lowercase hex digest of a written checksum (the prefix may be left out); None if it is not one."""
    match = _WRITTEN.match(value.strip())
    return match.group(1).lower() if match is not None else None
