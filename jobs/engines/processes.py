"""OS helpers for the local engine: detached supervised processes, identity by start time, signals.

Each job process runs under a tiny supervisor that double-forks away from the Celery worker (so a
worker killed with SIGKILL leaves the job running, and no zombie is left to the worker), starts its
own session, runs the launcher, and writes the launcher's exit status to a file. Any worker can then
learn a process's fate from /proc and that file, without being its parent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

_SUPERVISOR = r"""
import json, os, signal, subprocess, sys
status_path, stderr_path, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.fork():
    os._exit(0)  # the engine reaps this at once; the supervisor lives on, orphaned
os.setsid()
# SIGTERM to the group is meant for the job; the supervisor stays to record how it ended.
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
err = open(stderr_path, "ab", buffering=0)
try:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                             restore_signals=True, preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                             for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)])
except OSError as exc:
    sys.stdout.write("error %s\n" % exc)
    sys.stdout.flush()
    os._exit(1)
sys.stdout.write("%d %d\n" % (child.pid, os.getpid()))
sys.stdout.flush()
# Let go of the engine's pipes, or it would wait for their end as long as the job runs.
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
os.dup2(err.fileno(), 2)
code = child.wait()
tmp = status_path + ".tmp"
with open(tmp, "w") as f:
    json.dump({"exit_code": code if code >= 0 else 128 - code}, f)
os.replace(tmp, status_path)
"""


@dataclass(frozen=True)
class Spawned:
    pid: int  # the launcher
    pid_start: int  # its start time in clock ticks, so a reused pid is never mistaken for it
    supervisor: int  # session leader: its pid is the process group to signal
    supervisor_start: int


def free_ports(count: int) -> list[int]:
    """Ports the kernel says are free now, all distinct (bound together, then released)."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]


def start_time(pid: int) -> int | None:
    """Start time of a live (not zombie) process, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(pid: int | None, started: int | None) -> bool:
    return pid is not None and started is not None and start_time(pid) == started


def spawn(argv: list[str], env: dict[str, str], cwd: Path, status_path: Path, stderr_path: Path) -> Spawned:
    status_path.unlink(missing_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", _SUPERVISOR, str(status_path), str(stderr_path), *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    words = result.stdout.split()
    if len(words) != 2 or not all(w.isdigit() for w in words):
        raise OSError(f"could not start {argv[0]}: {result.stdout.strip() or result.stderr.strip()}")
    pid, supervisor = int(words[0]), int(words[1])
    return Spawned(pid, start_time(pid) or 0, supervisor, start_time(supervisor) or 0)


def exit_status(status_path: Path) -> int | None:
    try:
        return int(json.loads(status_path.read_text())["exit_code"])
    except (FileNotFoundError, ValueError, KeyError):
        return None


def signal_groups(pids: list[int], sig: signal.Signals) -> None:
    """Signal each process's group (the launcher leads its own; the supervisor leads the session)."""
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            # Not a group leader (any more): signal the process itself.
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def describe_exit(code: int | None) -> str:
    if code is None:
        return "vanished without an exit status"
    if code > 128:
        try:
            return f"exited with code {code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exited with code {code}"
