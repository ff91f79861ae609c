"""Domain errors: what went wrong, in words the user can act on, naming the field at fault; no HTTP here.

Engines, packages, logs, runtimes and storage raise these; core/api/errors.py gives each kind its
status and the one JSON error shape, so the rules below never know they are served over HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence


class DomainError(Exception):
    """A refusal: one or more messages, about `field` when one field is at fault; `code` names the rule."""

    code = "invalid"
    default_message = "invalid request"

    def __init__(self, message: str | Sequence[str] = "", field: str | None = None, code: str | None = None) -> None:
        self.messages = [message] if isinstance(message, str) else list(message)
        self.messages = [text for text in self.messages if text] or [self.default_message]
        self.field = field
        if code is not None:
            self.code = code
        super().__init__("; ".join(self.messages))

    @property
    def message(self) -> str:
        return str(self)


class Invalid(DomainError):
    """The input breaks a rule (400)."""


class Forbidden(DomainError):
    """The user may not do this (403)."""

    code = "permission_denied"
    default_message = "you do not have permission to perform this action"


class NotFound(DomainError):
    """No such object, or not one the user may see (404)."""

    code = "not_found"
    default_message = "not found"


class Conflict(DomainError):
    """The request conflicts with the state of an object (409)."""

    code = "conflict"
    default_message = "conflicts with an existing object"


class TooLarge(DomainError):
    """More than the user may store or send (413)."""

    code = "too_large"
    default_message = "the request is too large"


class Unavailable(DomainError):
    """Something the request needs is away for now; retrying later may work (503)."""

    code = "unavailable"
    default_message = "a service the request needs is unavailable; try again later"


class LengthRequired(DomainError):
    """The request must say its length first (411)."""

    code = "length_required"
    default_message = "Content-Length is required (chunks are not sent with chunked transfer encoding)"


class InsufficientStorage(DomainError):
    """The filesystem behind the request is full (507)."""

    code = "insufficient_storage"
    default_message = "the datacenter's storage is full; tell the operators"
