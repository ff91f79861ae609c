"""What a real node leaves on the host and how it goes: the one-node-per-host lock, network namespaces,
containerd shims, mounts, the kubelet's cgroups, and kube-router's iptables chains and ipsets."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools.k8s.testcluster.node_config import NodeError

# One real node per host: nodes share the bridge name, its address (CoreDNS) and the kubepods cgroups,
# so a second one starting or stopping breaks the first (seen: pods losing DNS, `cpuset.mems: no such
# device`). A node holds this lock from prepare() to cleanup_host(); another waits for it.
HOST_LOCK = Path("/run/paddlecloud-node/host.lock")
HOST_LOCK_WAIT_SECONDS = 1800
NETNS_DIR = Path("/run/netns")  # where `ip netns` (and the CNI plugins) name network namespaces
# What kube-router makes in the filter table and in ipset; the node removes them when it stops (kube-router
# leaves them behind on SIGTERM, and its --cleanup-config does nothing for the policy controller in v2.1).
NETPOL_JUMP_COMMENT = "kube-router netpol"
NETPOL_CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
NETPOL_IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "inet6:KUBE-")


def lock_host() -> int:
    """Wait (up to HOST_LOCK_WAIT_SECONDS) until no other real node runs on this host; the lock's descriptor."""
    HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + HOST_LOCK_WAIT_SECONDS
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise NodeError(f"another real node still runs on this host ({HOST_LOCK})") from None
            if not said:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                print(f"waiting for another real node on this host to stop (pid {holder})", file=sys.stderr)
                said = True
            time.sleep(1)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def netns_names() -> set[str]:
    return {entry.name for entry in NETNS_DIR.iterdir()} if NETNS_DIR.is_dir() else set()


def mounts_under(*dirs: Path) -> list[str]:
    """Mount points below any of `dirs`, in mount order."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [mount for mount in mounts if mount.startswith(tuple(str(d) for d in dirs))]


def kubepods_cgroups() -> list[Path]:
    # The kubelet's cgroupfs driver makes /sys/fs/cgroup/<controller>/kubepods; it outlives the kubelet.
    root = Path("/sys/fs/cgroup")
    return [d / "kubepods" for d in root.iterdir() if (d / "kubepods").is_dir()] + (
        [root / "kubepods"] if (root / "kubepods").is_dir() else []
    )


def remove_kubepods_cgroups() -> None:
    """Remove the kubelet's cgroup trees, deepest first (a cgroup goes only once its children have)."""
    for hierarchy in kubepods_cgroups():
        for dirpath, _, _ in sorted(os.walk(hierarchy), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                Path(dirpath).rmdir()


def shim_pids(containerd_sock: Path) -> list[int]:
    # Shims daemonize into their own session, so stopping containerd's group does not reach them.
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                if b"containerd-shim" in cmdline[0] and str(containerd_sock).encode() in cmdline:
                    pids.append(int(entry.name))
    return pids


def netpol_chains() -> list[str]:
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout.splitlines()
    chains = [line.split()[1] for line in rules if line.startswith("-N ")]
    return [chain for chain in chains if chain.startswith(NETPOL_CHAIN_PREFIXES)]


def netpol_ipsets() -> list[str]:
    if shutil.which("ipset") is None:
        return []
    names = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout.split()
    return [name for name in names if name.startswith(NETPOL_IPSET_PREFIXES)]


def remove_netpol_rules() -> None:
    """Remove what kube-router put in the host's filter table and ipset (after it stopped): the jumps from
    the built-in chains first, then its chains (flushed, then deleted: they refer to each other), then its sets."""
    for builtin in ("INPUT", "FORWARD", "OUTPUT"):
        rules = subprocess.run(["iptables", "-S", builtin], capture_output=True, text=True, check=False).stdout
        for rule in rules.splitlines():
            if rule.startswith("-A ") and NETPOL_JUMP_COMMENT in rule:
                subprocess.run(["iptables", "-D", *shlex.split(rule)[1:]], capture_output=True, check=False)
    chains = netpol_chains()
    for verb in ("-F", "-X"):
        for chain in chains:
            subprocess.run(["iptables", verb, chain], capture_output=True, check=False)
    for name in netpol_ipsets():
        subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)
