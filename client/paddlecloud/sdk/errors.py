"""The errors paddlectl and the SDK raise: each one is a one-line message and an exit code.

Exit codes: 0 success; 1 the operation failed (the portal refused it, the network is down, the job
failed); 2 usage error (bad flag or value, bad config file), caught before anything is sent.
"""

from __future__ import annotations

from typing import Any

from paddlecloud.contract.states import SUCCEEDED

EXIT_FAILED = 1
EXIT_USAGE = 2


class PaddleCloudError(Exception):
    """Something failed; `str(error)` is the one line to show the user."""

    exit_code = EXIT_FAILED


class UsageProblem(PaddleCloudError, ValueError):
    """A bad flag, value or config file: nothing was sent to the portal."""

    exit_code = EXIT_USAGE


class ConfigError(UsageProblem):
    """The config file (~/.paddle/config) is missing, unreadable or invalid."""


class NetworkError(PaddleCloudError):
    """The portal could not be reached (connection refused, DNS, timeout, TLS)."""


class APIError(PaddleCloudError):
    """The portal answered with an error: its status, code, message and the fields at fault."""

    def __init__(self, status: int, detail: str, code: str = "", errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.errors = errors or []

    def fields(self) -> list[str]:
        return [str(e.get("field")) for e in self.errors if e.get("field")]


class JobFailed(PaddleCloudError):
    """A job ended in failed or killed state (raised by wait helpers that were asked to check)."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        super().__init__(describe_end(job))


def describe_end(job: dict[str, Any]) -> str:
    """'job fit failed: TrainerFailed: trainer 1 exited with code 1' (or succeeded/killed)."""
    state = job.get("state", "?")
    why = ": ".join(part for part in (job.get("reason") or "", job.get("message") or "") if part)
    return f"job {job.get('name')} {state}" + (f": {why}" if why and state != SUCCEEDED else "")


def network_problem(exc: Exception) -> str:
    """A short reason for a requests exception: 'connection refused', 'host not found', ..."""
    import requests  # noqa: PLC0415 - loaded already: only a request's failure gets here

    text = str(exc)
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error (check the endpoint's certificate or use the right scheme)"
    if isinstance(exc, requests.exceptions.Timeout):
        return "no answer in time"
    lowered = text.lower()
    for needle, reason in (
        ("connection refused", "connection refused"),
        ("name or service not known", "host not found"),
        ("nodename nor servname", "host not found"),
        ("temporary failure in name resolution", "host not found"),
        ("failed to resolve", "host not found"),
        ("no route to host", "no route to host"),
        ("network is unreachable", "network unreachable"),
        ("connection reset", "connection reset"),
        ("connection aborted", "connection lost"),
        ("remotedisconnected", "connection lost"),
        ("broken pipe", "connection lost"),
        ("timed out", "no answer in time"),  # a read timeout, however urllib3 words it
    ):
        if needle in lowered:
            return reason
    return "connection failed"
