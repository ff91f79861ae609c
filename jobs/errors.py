"""The jobs side's own refusals, beside the domain errors in portal/errors.py that it raises as they are."""

from __future__ import annotations

from portal.errors import Forbidden


class LogRefused(Forbidden):
    """A worker's log the portal will not read or write: a link or a non-file where the log should be."""

    code = "log_refused"
