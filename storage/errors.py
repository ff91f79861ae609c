"""Storage's own refusals (quota, a full or absent filesystem) and the one translation of OS errors."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import NoReturn

from core.errors import Conflict, DomainError, Forbidden, InsufficientStorage, Invalid, NotFound, TooLarge, Unavailable
from storage.beneath import NotRegularFile


class QuotaExceeded(TooLarge):
    # Too large for what the user may store; not worth retrying as is.
    code = "quota_exceeded"
    default_message = "storage quota exceeded"


class StorageUnavailable(Unavailable):
    code = "storage_unavailable"
    default_message = "the datacenter's storage is not mounted on the portal; tell the operators"


_NOT_REGULAR = "not_a_regular_file"

# errno -> the refusal it means for the logical path in the message.
_REFUSALS: dict[int, Callable[[str], DomainError]] = {
    errno.ENOENT: lambda p: NotFound(f"{p}: no such file or directory"),
    errno.ENOTDIR: lambda p: Conflict(f"{p}: a component of the path is not a directory", code="not_a_directory"),
    errno.EISDIR: lambda p: Conflict(f"{p} is a directory", code="is_a_directory"),
    errno.EEXIST: lambda p: Conflict(f"{p} already exists", code="exists"),
    errno.ENOTEMPTY: lambda p: Conflict(f"{p}: directory not empty", code="not_empty"),
    errno.ELOOP: lambda p: Forbidden(f"{p}: a symlink in the path is refused, not followed"),
    errno.ENOSPC: lambda p: InsufficientStorage(),
    errno.EDQUOT: lambda p: InsufficientStorage(),
    errno.EACCES: lambda p: Forbidden(f"{p}: the filesystem denied access"),
    errno.EPERM: lambda p: Forbidden(f"{p}: the filesystem denied access"),
    errno.EROFS: lambda p: Forbidden(f"{p}: the filesystem denied access"),
    errno.ENAMETOOLONG: lambda p: Invalid(f"{p}: name too long for the filesystem", field="path"),
    # What opening a socket, or a device without its driver, says.
    errno.ENXIO: lambda p: Conflict(f"{p} is not a regular file; it is not opened", code=_NOT_REGULAR),
    errno.ENODEV: lambda p: Conflict(f"{p} is not a regular file; it is not opened", code=_NOT_REGULAR),
    errno.EAGAIN: lambda p: Conflict(
        f"{p} changed while it was looked up (is a job replacing it?); try again", code="changing"
    ),
}


def _refusal(exc: OSError, logical: str) -> DomainError | None:
    """The refusal a filesystem error met while working on `logical` means; None for an unexpected one."""
    if isinstance(exc, NotRegularFile):
        return Conflict(f"{logical} is {exc.what}, not a regular file; it is not opened", code=_NOT_REGULAR)
    make = _REFUSALS.get(exc.errno or 0)
    return make(logical) if make is not None else None


def raise_os_error(exc: OSError, logical: str) -> NoReturn:
    """Raise the refusal `exc` means for `logical`, or `exc` itself when it is unexpected (a 500, logged)."""
    refusal = _refusal(exc, logical)
    if refusal is None:
        raise exc
    raise refusal from None
