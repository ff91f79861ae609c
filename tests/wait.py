"""The one polling helper of the tests: wait until a condition holds, or fail saying what was awaited."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

T = TypeVar("T")


class Watched(Protocol):
    """Something a wait gives up on early (a worker process that died), with a log to show on failure."""

    def failure(self) -> str | None: ...

    def log(self) -> str: ...


@dataclass
class WatchedProcess:
    """A child process whose exit ends a wait, with the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def failure(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"{self.name} exited ({code})"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_for(
    condition: Callable[[], T | None],
    what: str,
    timeout: float = 30.0,
    *,
    interval: float = 0.2,
    watch: Watched | None = None,
) -> T:
    """Call `condition` until it returns something truthy and return that; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if watch is not None and (failure := watch.failure()):
            raise AssertionError(f"{failure} while waiting for {what}:\n{watch.log()}")
        if time.monotonic() > deadline:
            log = f"\n{watch.log()}" if watch is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{log}")
        time.sleep(interval)
