"""Storage's own refusals (quota, a full or absent filesystem) and the one translation of OS errors."""

from __future__ import annotations

import errno
from typing import NoReturn

from portal.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, TooLarge, Unavailable


class QuotaExceeded(TooLarge):
    # Too large for what the user may store; not worth retrying as is.
    code = "quota_exceeded"
    default_message = "storage quota exceeded"


class InsufficientStorage(DomainError):
    code = "insufficient_storage"
    default_message = "the datacenter's storage is full; tell the operators"


class StorageUnavailable(Unavailable):
    code = "storage_unavailable"
    default_message = "the datacenter's storage is not mounted on the portal; tell the operators"


class LengthRequired(DomainError):
    code = "length_required"
    default_message = "Content-Length is required (chunks are not sent with chunked transfer encoding)"


def _refusal(exc: OSError, logical: str) -> DomainError | None:
    """The refusal a filesystem error met while working on `logical` means; None for an unexpected one."""
    code = exc.errno
    if code == errno.ENOENT:
        return NotFound(f"{logical}: no such file or directory")
    if code == errno.ENOTDIR:
        return Conflict(f"{logical}: a component of the path is not a directory", code="not_a_directory")
    if code == errno.EISDIR:
        return Conflict(f"{logical} is a directory", code="is_a_directory")
    if code == errno.EEXIST:
        return Conflict(f"{logical} already exists", code="exists")
    if code == errno.ENOTEMPTY:
        return Conflict(f"{logical}: directory not empty", code="not_empty")
    if code == errno.ELOOP:
        return Forbidden(f"{logical}: a symlink in the path is refused, not followed")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage()
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return Forbidden(f"{logical}: the filesystem denied access")
    if code == errno.ENAMETOOLONG:
        return Invalid(f"{logical}: name too long for the filesystem", field="path")
    return None


def raise_os_error(exc: OSError, logical: str) -> NoReturn:
    """Raise the refusal `exc` means for `logical`, or `exc` itself when it is unexpected (a 500, logged)."""
    refusal = _refusal(exc, logical)
    if refusal is None:
        raise exc
    raise refusal from None
