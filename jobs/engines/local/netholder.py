"""The network of one local job: a process that holds its own user and network namespaces.

Run by the engine as ``python netholder.py CONFIG_JSON`` under a supervisor (processes.spawn), never
imported by the portal: it uses the standard library only. Like a pod's sandbox container, it makes
the namespaces every process of the job then joins (``nsenter``), so a job's pservers and trainers
reach each other on the namespace's own loopback and nothing on the host: not its loopback
services, not another job.

It forks the namespace's holder, which makes a user namespace and a network namespace, brings up
loopback, forbids further user namespaces (root worker), applies the job's nftables rules and sleeps.
When the job may reach the outside, this process then starts slirp4netns on the holder (user-mode
networking: the job's connections leave through an ordinary socket of the host, never through a
route into the host's networks) and waits for it. It writes ``{"pid": <holder>}`` to the ready file
once the network is complete; it ends (and so does the holder) when slirp4netns or the holder ends,
or when the engine signals the process group at the job's end.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
PR_SET_PDEATHSIG = 1
SLIRP_READY_SECONDS = 20


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


def _die_with(parent: int) -> None:
    """End this process when `parent` ends, however it ends (SIGKILL too): an orphaned holder would keep
    the job's namespaces, and the engine would take them for a live network."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # it ended before the line above took effect
        os._exit(1)


def _holder(config: dict[str, Any], go: int, done: int) -> None:
    """In the child: the namespaces, loopback, the rules; then sleep until signalled."""
    _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    os.write(done, b"u")  # the parent maps our ids now
    if os.read(go, 1) != b"g":
        os._exit(1)
    _loopback_up()
    if config["root"]:
        # Jobs run here as their own uid: they may not make user namespaces of their own (and so gain
        # capabilities over new namespaces). An unprivileged worker's bwrap does it with --disable-userns.
        _write("/proc/sys/user/max_user_namespaces", "0")
    if config["rules"]:
        subprocess.run([config["nft"], "-f", "-"], input=config["rules"], text=True, check=True, timeout=30)
    os.write(done, b"r")
    while True:
        signal.pause()


def _map_ids(child: int, config: dict[str, Any]) -> None:
    """Root worker: root and the job's uid map to themselves (the job's files keep its real uid on the
    host). Unprivileged worker: the worker's uid is root inside, as `unshare --map-root-user` does."""
    if config["root"]:
        job = config["uid"]
        _write(f"/proc/{child}/uid_map", f"0 0 1\n{job} {job} 1\n")
        _write(f"/proc/{child}/gid_map", f"0 0 1\n{config['gid']} {config['gid']} 1\n")
    else:
        _write(f"/proc/{child}/setgroups", "deny")
        _write(f"/proc/{child}/uid_map", f"0 {os.geteuid()} 1\n")
        _write(f"/proc/{child}/gid_map", f"0 {os.getegid()} 1\n")


def _slirp(config: dict[str, Any], child: int) -> subprocess.Popen[bytes]:
    """slirp4netns on the holder's namespaces, configured (tap0, 10.0.2.0/24, DNS on 10.0.2.3)."""
    ready_r, ready_w = os.pipe()
    argv = [config["slirp4netns"], "--configure", "--disable-host-loopback"]
    if config["root"]:
        # It parses every packet a job sends, as root: its own empty mounts, every capability dropped
        # (this fails unprivileged), and only the system calls it needs.
        argv += ["--enable-sandbox", "--enable-seccomp"]
    argv += ["--ready-fd", str(ready_w), "--userns-path", f"/proc/{child}/ns/user"]
    argv += ["--netns-type", "path", f"/proc/{child}/ns/net", "tap0"]
    parent = os.getpid()
    slirp = subprocess.Popen(
        argv,
        pass_fds=(ready_w,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: _die_with(parent),  # it ends with this holder, however the holder ends
    )
    os.close(ready_w)
    deadline = time.monotonic() + SLIRP_READY_SECONDS
    while time.monotonic() < deadline:
        readable, _, _ = select.select([ready_r], [], [], 0.2)
        if readable:
            if os.read(ready_r, 1) == b"1":
                os.close(ready_r)
                return slirp
            break
        if slirp.poll() is not None:
            break
    slirp.kill()
    raise OSError(f"slirp4netns did not configure the job's network (exit {slirp.poll()})")


def main() -> None:
    config = json.loads(sys.argv[1])
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(go_w)
        os.close(done_r)
        try:
            _die_with(parent)
            _holder(config, go_r, done_w)
        except BaseException as exc:  # the child must never return into the parent's code
            sys.stderr.write(f"network holder: {exc}\n")
        os._exit(1)
    os.close(go_r)
    os.close(done_w)
    try:
        if os.read(done_r, 1) != b"u":
            raise OSError("the network holder could not make its namespaces")
        _map_ids(child, config)
        os.write(go_w, b"g")
        if os.read(done_r, 1) != b"r":
            raise OSError("the network holder could not set up loopback and its rules")
        slirp = _slirp(config, child) if config["egress"] else None
    except OSError as exc:
        sys.stderr.write(f"network holder: {exc}\n")
        os.kill(child, signal.SIGKILL)
        sys.exit(1)
    tmp = config["ready"] + ".tmp"
    _write(tmp, json.dumps({"pid": child}))
    Path(tmp).replace(config["ready"])
    # Whichever ends first (the holder, slirp4netns) ends the network: the engine sees it gone.
    os.waitpid(child, 0) if slirp is None else _wait_either(child, slirp)


def _wait_either(child: int, slirp: subprocess.Popen[bytes]) -> None:
    while True:
        pid, _ = os.waitpid(-1, 0)
        if pid in (child, slirp.pid):
            break
    for pid in (child, slirp.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
