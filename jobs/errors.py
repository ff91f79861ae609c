"""The jobs side's own refusals, beside the domain errors in core/errors.py that it raises as they are."""

from __future__ import annotations

from core.errors import Forbidden


class LogRefused(Forbidden):
    """A worker's log the portal will not read or write: a link or a non-file where the log should be."""

    code = "log_refused"
