"""The launcher's hold on its entry's processes: it adopts orphans, reaps them, and ends what is left.

The launcher is a child subreaper, so whatever the entry starts comes back to it when its parent
dies; it exits only when the whole job process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def become_subreaper() -> None:
    # /bin/sh (dash) does not exec the last command: python is our grandchild. Orphaned
    # descendants (sh died first, or the entry left a background process) must come back to
    # us so that the launcher exits only when the whole job process is gone.
    with contextlib.suppress(OSError, AttributeError):  # not Linux: orphans go to init instead
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this one can see."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # comm may contain spaces
        except (OSError, IndexError):
            continue
        out[int(stat.parent.name)] = int(fields[1])
    return out


def children() -> list[int]:
    me = os.getpid()
    return [pid for pid, parent in _parents().items() if parent == me]


def descendants() -> list[int]:
    """Every process under this one, children first."""
    parents = _parents()
    found, frontier = [], [os.getpid()]
    while frontier:
        level = [pid for pid, parent in parents.items() if parent in frontier]
        found += level
        frontier = level
    return found


def _reap_until(deadline: float) -> bool:
    """Reap children until none is left (True) or the deadline passes (False)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def reap_descendants(say: Callable[[str], None], settle: float = 2.0, grace: float = 5.0) -> None:
    """After the entry's shell exited: wait for what it left, then SIGTERM, then SIGKILL it."""
    if _reap_until(time.monotonic() + settle):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = children()
        say(f"sending {signal.Signals(sig).name} to {len(pids)} process(es) the entry left running")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if _reap_until(time.monotonic() + grace):
            return


def kill_descendants() -> None:
    """SIGKILL the whole entry at once (it is to run again: a SIGTERM'd Paddle prints a crash report)."""
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
