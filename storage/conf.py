"""Storage settings: environment variables read once, typed and loud; Django settings override them.

Each value is looked up as `settings.<NAME>` first (so a test or portal/settings.py can set it), then
from the environment variable of the same name, then the default.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.env import env_int

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# Chunk sizes must be multiples of this, so chunks written by different web hosts never share a page
# of the shared filesystem (NFS and CephFS clients cache whole pages).
CHUNK_ALIGN = 64 * KIB

_ENV_DEFAULTS: dict[str, tuple[int, int]] = {
    # name: (default, minimum)
    "PADDLECLOUD_UPLOAD_CHUNK": (8 * MIB, CHUNK_ALIGN),
    "PADDLECLOUD_UPLOAD_MAX_CHUNK": (64 * MIB, CHUNK_ALIGN),
    "PADDLECLOUD_UPLOAD_EXPIRE_SECONDS": (24 * 3600, 60),
    "PADDLECLOUD_UPLOAD_VERIFY_INLINE": (4 * GIB, 0),
}
_env: dict[str, int] = {name: env_int(name, default, minimum) for name, (default, minimum) in _ENV_DEFAULTS.items()}


def _get(name: str) -> int:
    value = getattr(settings, name, _env[name])
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
