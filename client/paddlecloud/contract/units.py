"""Byte counts and times as people read and write them, and free local ports: the one copy of each.

The portal, both engines, the launcher and paddlectl share these, so a size or a time reads the same
wherever it is shown.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack
from datetime import UTC, datetime

_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity_bytes(count: float) -> str:
    """A byte count in the units a job spec is written in: 4Gi, 1.5Gi, 512 bytes (four significant digits)."""
    for unit, size in _BINARY:
        if count >= size:
            return f"{count / size:.4g}{unit}"
    return f"{count} bytes"


def exact_quantity_bytes(count: int) -> str:
    """A byte count as an exact Kubernetes quantity: 256Gi where it divides evenly, else the plain number."""
    for unit, size in _BINARY:
        if count and count % size == 0:
            return f"{count // size}{unit}"
    return str(count)


def human_bytes(count: int) -> str:
    """A byte count for storage reports: 1000 B, 64.0 KiB, 1.5 GiB (TiB at most)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 time as Kubernetes and the API write it ("2025-01-02T03:04:05Z"); None if absent or bad.
    A time without a zone is taken as UTC (what both write)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports the kernel says are free now, all distinct (bound together, then released)."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
