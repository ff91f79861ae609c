"""OS helpers for the local engine: detached supervised processes, identity by start time, signals.

Each job process runs under a tiny supervisor that double-forks away from the Celery worker (so a
worker killed with SIGKILL leaves the job running, and no zombie is left to the worker), starts its
own session, runs the launcher, and writes the launcher's exit status to a file. Any worker can then
learn a process's fate from /proc and that file, without being its parent; the supervisor also says
at once that the process ended (events.py), so the job's state need not wait for the next reconcile.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import paddlecloud
import psutil

from jobs.engines.local import cgroups, events

_SUPERVISOR = r"""
import json, os, resource, signal, subprocess, sys, threading, time
config, argv = json.loads(sys.argv[1]), sys.argv[2:]
status_path = config["status"]
if os.fork():
    os._exit(0)  # the engine reaps this at once; the supervisor lives on, orphaned
os.setsid()
# SIGTERM to the group is meant for the job; the supervisor stays to record how it ended.
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
err = open(config["stderr"], "ab", buffering=0)
log = config["log"]
capped = log_r = log_w = None
if log:  # the launcher's stdout becomes log.txt here, out of the job's reach (EngineLog)
    sys.path.insert(0, log["lib"])
    from paddlecloud.contract import logcap, logtimes
    times = logtimes.Recorder(os.fdopen(log["times_fd"], "a+b", buffering=0), os.fstat(log["fd"]).st_size)
    capped = logcap.CappedLog(os.fdopen(log["fd"], "r+b", buffering=0), times, log["limit"])
    log_r, log_w = os.pipe()

def write_log():
    global capped
    while True:  # drained to the end even when the file cannot be written: a full pipe would hang the job
        chunk = os.read(log_r, 65536)
        if not chunk:
            break
        if capped is not None:
            try:
                capped.write(chunk)
            except OSError as exc:
                capped.stop_times()
                capped = None
                err.write(("log.txt write failed, the rest of the output is dropped: %s\n" % exc).encode())
info_r = info_w = None
if "@INFO_FD@" in argv:  # bwrap reports the host pid of the sandbox's pid 1 (the launcher) there
    info_r, info_w = os.pipe()
    argv = [str(info_w) if a == "@INFO_FD@" else a for a in argv]

def prepare():
    # Its own group: a SIGTERM for the supervisor's group must not end bwrap (and so the job) at once.
    os.setpgid(0, 0)
    for procs in config["cgroup_procs"]:  # before exec: everything the job starts is inside
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    if config["nproc"]:  # the job uid's processes and threads at once, all its workers together
        resource.setrlimit(resource.RLIMIT_NPROC, (config["nproc"], config["nproc"]))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)

try:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_w or subprocess.DEVNULL, stderr=err,
                             pass_fds=((info_w,) if info_w else ()) + tuple(config["inherit"]), preexec_fn=prepare)
except (OSError, subprocess.SubprocessError) as exc:
    sys.stdout.write("error %s\n" % exc)
    sys.stdout.flush()
    os._exit(1)
for fd in config["inherit"]:  # the sandbox's read-only binds of the log: bwrap has them now
    os.close(fd)
writer = None
if log_w is not None:
    os.close(log_w)
    writer = threading.Thread(target=write_log, daemon=True)
    writer.start()
pid = child.pid
if info_w is not None:
    os.close(info_w)
    data = b""
    while True:  # bwrap writes one JSON object and closes its end (at once, or when it fails)
        chunk = os.read(info_r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(info_r)
    try:
        pid = int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        child.wait()
        with open(config["stderr"], "rb") as f:
            tail = f.read()[-500:].decode("utf-8", "replace").strip().splitlines()
        sys.stdout.write("error the sandbox did not start: %s\n" % (tail[-1] if tail else "no message"))
        sys.stdout.flush()
        os._exit(1)
sys.stdout.write("%d %d\n" % (pid, os.getpid()))
sys.stdout.flush()
# Let go of the engine's pipes, or it would wait for their end as long as the job runs.
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
os.dup2(err.fileno(), 2)
code = child.wait()
if writer is not None:
    # The sandbox's processes ended with its pid 1, so the pipe's end comes at once; a process that
    # escaped (no sandbox) and still holds it is not waited for long.
    writer.join(10)
status = {"exit_code": code if code >= 0 else 128 - code}
if config["oom_events"]:
    try:
        with open(config["oom_events"]) as f:
            kills = [l.split()[1] for l in f if l.startswith("oom_kill ")]
        if kills and int(kills[0]) > 0:
            status["oom_killed"] = True
    except (OSError, ValueError, IndexError):
        pass
# What the process used, for the accounting (cgroups.cpu_seconds parses the same two formats).
if config["cpu_usage"]:
    try:
        with open(config["cpu_usage"]) as f:
            text = f.read()
        usec = [l.split()[1] for l in text.splitlines() if l.startswith("usage_usec ")]
        status["cpu_seconds"] = int(usec[0]) / 1e6 if usec else int(text.strip()) / 1e9
    except (OSError, ValueError, IndexError):
        pass
if config["memory_peak"]:
    try:
        with open(config["memory_peak"]) as f:
            status["peak_memory"] = int(f.read().strip())
    except (OSError, ValueError):
        pass
if config["pids_events"]:
    try:
        with open(config["pids_events"]) as f:
            refused = [l.split()[1] for l in f if l.startswith("max ")]
        if refused and int(refused[0]) > 0:
            status["forks_refused"] = int(refused[0])
    except (OSError, ValueError, IndexError):
        pass
tmp = status_path + ".tmp"
with open(tmp, "w") as f:
    json.dump(status, f)
os.replace(tmp, status_path)
if config["events"]:  # tell the control worker at once (jobs/engines/local/events.py)
    try:
        fd = os.open(config["events"], os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, config["event"].encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # nobody listening, or the pipe is full: the periodic reconcile sees the exit
for directory in config["cgroup_dirs"]:  # empty once the namespace's last process is reaped
    for _ in range(50):
        try:
            os.rmdir(directory)
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.1)
for directory in config["cgroup_enclosing"]:  # the user's group, once none of its workers is left
    try:
        os.rmdir(directory)
    except OSError:
        pass
"""


@dataclass(frozen=True)
class EngineLog:
    """A worker's log as its supervisor writes it from the launcher's stdout: log.txt opened read-write and
    log.times opened to append (by the engine, beneath the owner's home), kept under ``limit`` bytes (logcap)."""

    fd: int
    times_fd: int
    limit: int | None


# Where the supervisor (started with -I -S: no site-packages) imports paddlecloud.contract's log cap from.
_CLIENT_LIB = str(Path(paddlecloud.__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Spawned:
    pid: int  # the launcher
    pid_start: float  # its start time, so a reused pid is never mistaken for it
    supervisor: int  # session leader: its pid is the process group to signal
    supervisor_start: float

    def record(self) -> dict[str, int | float]:
        """What the engine keeps of it in the job's engine_data (Supervisor.fate, groups and stop read it)."""
        return {
            "pid": self.pid,
            "pid_start": self.pid_start,
            "supervisor": self.supervisor,
            "supervisor_start": self.supervisor_start,
        }


def start_time(pid: int) -> float | None:
    """When a live (not zombie) process started (psutil's create_time), or None when it is gone."""
    try:
        process = psutil.Process(pid)
        if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None
        return float(process.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def is_alive(pid: int | None, started: float | None) -> bool:
    return pid is not None and started is not None and start_time(pid) == started


def spawn(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    status_path: Path,
    stderr_path: Path,
    cgroup: cgroups.Group | None = None,
    job_id: int | None = None,
    nproc: int | None = None,
    log: EngineLog | None = None,
    inherit: tuple[int, ...] = (),
) -> Spawned:
    """Start ``argv`` under a detached supervisor (in ``cgroup`` when given; with RLIMIT_NPROC ``nproc``, for
    a process that runs as a uid of its own: the limit counts every process of that uid on the host).

    With ``log`` the process's stdout is a pipe to the supervisor, which writes it to that log; ``inherit``
    are descriptors ``argv`` gets at the same numbers (a sandbox's ``--ro-bind-fd``), closed in the
    supervisor once it started. Both are the caller's to close afterwards.

    When ``argv`` is a sandbox's command (it holds sandbox.INFO_FD), the pid returned is the
    sandbox's pid 1 on the host, the process to follow and signal. With ``job_id``, the supervisor
    announces the process's exit on the events pipe (events.py) the moment it has written its status.
    """
    status_path.unlink(missing_ok=True)
    config = {
        "status": str(status_path),
        "stderr": str(stderr_path),
        "cgroup_procs": [str(p) for p in cgroup.procs] if cgroup else [],
        "cgroup_dirs": [str(d) for d in cgroup.dirs] if cgroup else [],
        "cgroup_enclosing": [str(d) for d in cgroup.enclosing] if cgroup else [],
        "nproc": nproc or 0,
        "oom_events": str(cgroup.events) if cgroup else "",
        "pids_events": str(cgroup.pids_events) if cgroup and cgroup.pids_events else "",
        "cpu_usage": str(cgroup.cpu_usage) if cgroup and cgroup.cpu_usage else "",
        "memory_peak": str(cgroup.memory_peak) if cgroup and cgroup.memory_peak else "",
        "events": str(events.pipe_path()) if job_id is not None else "",
        "event": events.line(job_id) if job_id is not None else "",
        "log": {"fd": log.fd, "times_fd": log.times_fd, "limit": log.limit, "lib": _CLIENT_LIB} if log else None,
        "inherit": list(inherit),
    }
    result = subprocess.run(
        # -I -S: the standard library only, no site-packages scan and no PYTHON* variables of the
        # worker: about 60 ms less per process started, and nothing of the worker's environment steers it.
        [sys.executable, "-I", "-S", "-c", _SUPERVISOR, json.dumps(config), *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        pass_fds=(log.fd, log.times_fd, *inherit) if log else inherit,
    )
    words = result.stdout.split()
    if len(words) != 2 or not all(w.isdigit() for w in words):
        raise OSError(f"could not start {argv[0]}: {result.stdout.strip() or result.stderr.strip()}")
    pid, supervisor = int(words[0]), int(words[1])
    return Spawned(pid, start_time(pid) or 0, supervisor, start_time(supervisor) or 0)


def measured(status_path: Path) -> tuple[float | None, int | None]:
    """(cpu seconds, peak memory bytes) the process used, as its supervisor read them from its cgroup; None
    where unknown (no cgroup here, a kernel without memory.peak, or the process still runs)."""
    try:
        status = json.loads(status_path.read_text())
    except (OSError, ValueError):
        return None, None
    cpu, peak = status.get("cpu_seconds"), status.get("peak_memory")
    return (float(cpu) if isinstance(cpu, int | float) else None, int(peak) if isinstance(peak, int) else None)


def exit_status(status_path: Path) -> int | None:
    try:
        return int(json.loads(status_path.read_text())["exit_code"])
    except (FileNotFoundError, ValueError, KeyError):
        return None


def oom_killed(status_path: Path) -> bool:
    """Whether the kernel killed a process of it for going over its memory limit."""
    try:
        return bool(json.loads(status_path.read_text()).get("oom_killed"))
    except (FileNotFoundError, ValueError, AttributeError):
        return False


def forks_refused(status_path: Path) -> int:
    """How many forks the pids limit refused the process's group (0 when none, or unknown)."""
    try:
        return int(json.loads(status_path.read_text()).get("forks_refused", 0))
    except (FileNotFoundError, ValueError, AttributeError, TypeError):
        return 0


def signal_groups(pids: list[int], sig: signal.Signals) -> None:
    """Signal each process's group (the launcher leads its own; the supervisor leads the session)."""
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            # Not a group leader (any more): signal the process itself.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "vanished without an exit status"
    if code > 128:
        try:
            return f"exited with code {code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exited with code {code}"
