"""Storage settings: the upload limits portal/settings.py reads from the environment, checked where used.

The values are Django settings (`PADDLECLOUD_UPLOAD_*`, typed by core.env in portal/settings.py), so a
test overrides them as it overrides any setting; this module adds the rules only storage knows: chunk
sizes are 64 KiB-aligned and a chunk is at most 1 GiB.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# Chunk sizes must be multiples of this, so chunks written by different web hosts never share a page
# of the shared filesystem (NFS and CephFS clients cache whole pages).
CHUNK_ALIGN = 64 * KIB


def _get(name: str) -> int:
    value = getattr(settings, name)
    if not isinstance(value, int):
        raise ImproperlyConfigured(f"{name}: {value!r} is not an integer")
    return value


def _aligned(name: str) -> int:
    value = _get(name)
    if value < CHUNK_ALIGN or value % CHUNK_ALIGN:
        raise ImproperlyConfigured(f"{name}: {value} must be a multiple of {CHUNK_ALIGN} (64 KiB)")
    return value


def default_chunk_size() -> int:
    """Chunk size offered when the client does not choose one."""
    return min(_aligned("PADDLECLOUD_UPLOAD_CHUNK"), max_chunk_size())


def max_chunk_size() -> int:
    """The largest chunk a client may send: the only per-request size limit."""
    value = _aligned("PADDLECLOUD_UPLOAD_MAX_CHUNK")
    if value > GIB:
        raise ImproperlyConfigured(f"PADDLECLOUD_UPLOAD_MAX_CHUNK: {value} is above the maximum {GIB} (1 GiB)")
    return value


def upload_expire_seconds() -> int:
    """An open upload untouched for this long is abandoned: its temp file and reservation go."""
    return _get("PADDLECLOUD_UPLOAD_EXPIRE_SECONDS")


def verify_inline_bytes() -> int:
    """Uploads up to this size are verified inside the `complete` request; larger ones in the background."""
    return _get("PADDLECLOUD_UPLOAD_VERIFY_INLINE")
