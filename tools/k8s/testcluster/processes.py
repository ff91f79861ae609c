"""Process utilities for the test cluster: free ports, process groups that die with the test, pid checks."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import time
from pathlib import Path


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out for port 0, all held open together so they are distinct."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def die_with_parent() -> None:
    # PR_SET_PDEATHSIG: if the test process is SIGKILLed, the kernel kills the component too.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def kill_group(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group led by pid, SIGKILL it after `grace` seconds; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while _group_alive(pid):
        time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    # Reap the leader if it is our child, otherwise it lingers as a zombie and the group looks alive.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group whose only members are zombies not reaped by us (e.g. `down` from another shell) is dead.
    return any(_is_live(p) for p in _pids_in_group(pgid))


def _pids_in_group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    pids.append(int(entry.name))
    return pids


def _is_live(pid: int) -> bool:
    with contextlib.suppress(OSError, IndexError):
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def pid_is(pid: int, exe: str) -> bool:
    """True while pid still runs `exe` (guards against a recycled pid before signalling it)."""
    try:
        cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == exe
