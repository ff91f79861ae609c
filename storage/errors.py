"""The storage API's errors, in the portal's one JSON error shape, each with a status that means it."""

from __future__ import annotations

import errno

from rest_framework import exceptions, status

from portal.api.errors import Conflict


class QuotaExceeded(exceptions.APIException):
    # 413: the request is too large for what the user may store; not worth retrying as is.
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "storage quota exceeded"
    default_code = "quota_exceeded"


class InsufficientStorage(exceptions.APIException):
    status_code = status.HTTP_507_INSUFFICIENT_STORAGE
    default_detail = "the datacenter's storage is full; tell the operators"
    default_code = "insufficient_storage"


class StorageUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "the datacenter's storage is not mounted on the portal; tell the operators"
    default_code = "storage_unavailable"


class LengthRequired(exceptions.APIException):
    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_detail = "Content-Length is required (chunks are not sent with chunked transfer encoding)"
    default_code = "length_required"


class Refused(exceptions.APIException):
    """A 400 (or other status) naming the field at fault, with its own top-level code."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, field: str, message: str, code: str, status_code: int = status.HTTP_400_BAD_REQUEST) -> None:
        super().__init__({field: [message]}, code)
        self.status_code = status_code
        self.default_code = code


def path_invalid(message: str, field: str = "path") -> exceptions.ValidationError:
    return exceptions.ValidationError({field: [message]})


def conflict(message: str, code: str = "conflict") -> Conflict:
    return Conflict(message, code=code)


def from_os_error(exc: OSError, logical: str) -> exceptions.APIException:
    """The API error for a filesystem error met while working on `logical`."""
    code = exc.errno
    if code == errno.ENOENT:
        return exceptions.NotFound(f"{logical}: no such file or directory")
    if code == errno.ENOTDIR:
        return conflict(f"{logical}: a component of the path is not a directory", "not_a_directory")
    if code == errno.EISDIR:
        return conflict(f"{logical} is a directory", "is_a_directory")
    if code == errno.EEXIST:
        return conflict(f"{logical} already exists", "exists")
    if code == errno.ENOTEMPTY:
        return conflict(f"{logical}: directory not empty", "not_empty")
    if code == errno.ELOOP:
        return exceptions.PermissionDenied(f"{logical}: a symlink in the path is refused, not followed")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage()
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return exceptions.PermissionDenied(f"{logical}: the filesystem denied access")
    if code == errno.ENAMETOOLONG:
        return path_invalid(f"{logical}: name too long for the filesystem")
    raise exc
