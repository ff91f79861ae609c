"""A network of its own for every local job: the namespace holder, its firewall, how processes join it.

Why this shape (docs/explanation/isolation.md): a job's processes share one network
namespace, like the containers of a pod, so they reach each other on its loopback and nothing else.
Egress, when the datacenter allows it, is slirp4netns (user-mode networking, as rootless Podman
uses it): it works for a root worker and an unprivileged one alike, needs no bridge, no host routes
and no host firewall changes, and `--disable-host-loopback` keeps the host's 127.0.0.1 out. The
job's own nftables rules, applied inside its namespace where the job has no capability to change
them, refuse every private, loopback, link-local and multicast range and every address of the host
itself, so only the outside world is left (DNS goes to slirp's resolver on 10.0.2.3).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from jobs.engines import netranges
from jobs.engines.local import processes

SLIRP_DNS = "10.0.2.3"
READY_SECONDS = 30
HOLDER = Path(__file__).with_name("netholder.py")
# The holder's files in the job's state folder (the engine's, out of the job's reach).
READY_FILE, EXIT_FILE, ERROR_FILE = "network.json", "network-exit.json", "network.err"
HOLDER_SAYS = "network holder: "  # how netholder.py's own error lines begin


class NetworkUnavailable(Exception):
    """This host cannot give the job its own network; the message says what is missing."""


@dataclass(frozen=True)
class Held:
    """A started job network: the supervised holder process, and the namespace holder inside it."""

    spawned: processes.Spawned
    netns_pid: int
    netns_start: float
    egress: bool


def host_networks() -> list[str]:
    """Every IPv4 network this host has an address in (its own addresses with their prefixes)."""
    out: list[str] = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family.name != "AF_INET" or not address.netmask:
                continue
            network = ipaddress.ip_interface(f"{address.address}/{address.netmask}").network
            out.append(str(network))
    return sorted(set(out))


def ruleset(egress: bool, host_nets: list[str]) -> str:
    """The nftables rules of a job's namespace: loopback always; with egress, DNS to slirp's resolver
    and the public internet, never the host's networks nor a private, loopback or multicast range."""
    if not egress:
        return ""  # nothing but loopback exists in the namespace: no rule is needed to keep it closed
    blocked = ", ".join(dict.fromkeys((*netranges.PRIVATE_V4, *host_nets)))
    return (
        "table inet paddlecloud {\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n"
        '    oifname "lo" accept\n'
        f"    ip daddr {SLIRP_DNS} meta l4proto {{ tcp, udp }} th dport 53 accept\n"
        f"    ip daddr {{ {blocked} }} reject with icmpx type admin-prohibited\n"
        "    meta nfproto ipv6 reject with icmpx type admin-prohibited\n"
        "  }\n"
        "}\n"
    )


def resolv_conf(egress: bool) -> str:
    """The job's /etc/resolv.conf: slirp's resolver, or none (no name outside the job resolves)."""
    return f"nameserver {SLIRP_DNS}\n" if egress else "# no network outside this job\n"


def tools(egress: bool) -> dict[str, str]:
    """The host programs a job network needs: nsenter always; slirp4netns and nft for egress."""
    needed = {"nsenter": "util-linux"} | ({"slirp4netns": "slirp4netns", "nft": "nftables"} if egress else {})
    found = {name: shutil.which(name) for name in needed}
    missing = [f"{name} (Debian package {package})" for name, package in needed.items() if not found[name]]
    if missing:
        raise NetworkUnavailable(f"a job network needs {', '.join(missing)} on the worker's host")
    return {name: path for name, path in found.items() if path}


def egress_tools_missing() -> str:
    """What this host lacks to give jobs egress ("" when nothing): then jobs run closed (world.egress)."""
    try:
        tools(egress=True)
    except NetworkUnavailable as exc:
        return str(exc)
    return ""


def enter_argv(nsenter: str, netns_pid: int) -> list[str]:
    """The prefix that runs a command in the job's user and network namespaces, keeping our ids
    (root stays root inside: the holder maps 0 to 0; an unprivileged worker is root inside too)."""
    return [
        nsenter,
        f"--user=/proc/{netns_pid}/ns/user",
        f"--net=/proc/{netns_pid}/ns/net",
        "--preserve-credentials",
        "--",
    ]


def start(state_dir: Path, uid: int, gid: int, egress: bool) -> Held:
    """Start the job's network holder under a supervisor and wait until its network is complete."""
    found = tools(egress)
    state_dir.mkdir(parents=True, exist_ok=True)
    ready = state_dir / READY_FILE
    ready.unlink(missing_ok=True)
    config = {
        "root": os.geteuid() == 0,
        "uid": uid,
        "gid": gid,
        "egress": egress,
        "rules": ruleset(egress, host_networks()),
        "nft": found.get("nft", ""),
        "slirp4netns": found.get("slirp4netns", ""),
        "ready": str(ready),
    }
    spawned = processes.spawn(
        [sys.executable, "-I", "-S", str(HOLDER), json.dumps(config)],  # standard library only (processes.spawn)
        env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")},
        cwd=state_dir,
        status_path=state_dir / EXIT_FILE,
        stderr_path=state_dir / ERROR_FILE,
    )
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if ready.is_file():
            netns_pid = int(json.loads(ready.read_text())["pid"])
            started = processes.start_time(netns_pid)
            if started is not None:
                return Held(spawned, netns_pid, started, egress)
        if not processes.is_alive(spawned.pid, spawned.pid_start):
            break
        time.sleep(0.02)
    processes.signal_groups([spawned.pid], signal.SIGKILL)
    raise NetworkUnavailable(f"the job's network did not come up: {_last_error(state_dir / ERROR_FILE)}")


def ended(state_dir: Path) -> str:
    """Why a job's network is gone, for the message of a process that could not join it."""
    how = processes.describe_exit(processes.exit_status(state_dir / EXIT_FILE))
    error = _last_error(state_dir / ERROR_FILE)  # slirp4netns writes there too: only the holder's own words
    return f"the job's network ended (its holder {how}{': ' + error if error.startswith(HOLDER_SAYS) else ''})"


def _last_error(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no message"
    return lines[-1][:300] if lines else "no message"
