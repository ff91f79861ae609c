"""CPU, memory and process-count limits for local job processes: one cgroup per process, v1 (as root) or v2.

No PyPI library covers both hierarchies (cgroupspy is v1 only), and the job needs four files, so this
is small: find where this worker may make cgroups, make one with the limits, and let the process's
supervisor join it, count OOM kills and remove it (see processes.py). A process's group may sit in an
enclosing one (`within`: the job owner's, `user-<id>`) whose limits bound all of its groups together:
one user's workers on this host share its pids.max, so no user's jobs can fill the host's process table.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

CPU_PERIOD_US = 100_000
GROUP_DIR = "paddlecloud"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    cpus: Decimal | None = None
    pids: int | None = None  # processes and threads at once (the pids controller)


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    memory: Path  # the directory our groups go in, per controller (the same for v2)
    cpu: Path
    pids: Path | None = None  # None: this host has no pids controller for us
    cpuacct: Path | None = None  # v1 with cpuacct mounted apart from cpu: where the cpu time is counted


@dataclass(frozen=True)
class Enclosing:
    """A group above processes' own ones (a user's): its name beside theirs and the limits of all together."""

    name: str
    limits: Limits


@dataclass(frozen=True)
class Group:
    """One process's cgroup: the directories to join and remove, where OOM kills are counted and where
    refused forks are (pids.events' ``max``; None without a pids controller); the enclosing group's
    directories, removed once empty."""

    dirs: tuple[Path, ...]
    events: Path
    pids_events: Path | None = None
    cpu_usage: Path | None = None  # v2 cpu.stat (usage_usec), v1 cpuacct.usage (ns): the accounting's cpu used
    memory_peak: Path | None = None  # v2 memory.peak, v1 memory.max_usage_in_bytes: its peak memory
    enclosing: tuple[Path, ...] = ()

    @property
    def procs(self) -> tuple[Path, ...]:
        return tuple(d / "cgroup.procs" for d in self.dirs)


def own_paths(proc_self_cgroup: str) -> dict[str, str]:
    """controller -> this process's cgroup path, from /proc/self/cgroup ("" = the v2 unified one)."""
    out: dict[str, str] = {}
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            out[controller] = parts[2]
    return out


def detect(root: Path, proc_self_cgroup: str) -> Hierarchy | None:
    """Where our groups go: v1 under this process's memory and cpu groups, else v2 under its own."""
    paths = own_paths(proc_self_cgroup)
    if (root / "memory").is_dir() and (root / "cpu").is_dir() and "memory" in paths:
        memory = root / "memory" / paths["memory"].lstrip("/") / GROUP_DIR
        cpu = root / "cpu" / paths.get("cpu", "/").lstrip("/") / GROUP_DIR
        pids = root / "pids" / paths.get("pids", "/").lstrip("/") / GROUP_DIR if (root / "pids").is_dir() else None
        accounting = root / "cpuacct"
        apart = accounting.is_dir() and "cpuacct" in paths and accounting.resolve() != (root / "cpu").resolve()
        cpuacct = accounting / paths["cpuacct"].lstrip("/") / GROUP_DIR if apart else None
        return Hierarchy(1, memory, cpu, pids, cpuacct)
    if (root / "cgroup.controllers").is_file():
        base = root / paths.get("", "/").lstrip("/") / GROUP_DIR
        pids = base if "pids" in (root / "cgroup.controllers").read_text().split() else None
        return Hierarchy(2, base, base, pids)
    return None


def limit_files(version: int, limits: Limits) -> list[tuple[str, str, str]]:
    """(controller, file, value) to write, in order, for ``limits``."""
    out: list[tuple[str, str, str]] = []
    if limits.memory_bytes is not None:
        if version == 1:
            out += [
                ("memory", "memory.limit_in_bytes", str(limits.memory_bytes)),
                # After the plain limit (it must not exceed it); absent without swap accounting.
                ("memory", "memory.memsw.limit_in_bytes", str(limits.memory_bytes)),
            ]
        else:
            out += [("memory", "memory.max", str(limits.memory_bytes)), ("memory", "memory.swap.max", "0")]
    if limits.cpus is not None:
        quota = max(1000, int(limits.cpus * CPU_PERIOD_US))
        if version == 1:
            out += [("cpu", "cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu", "cpu.cfs_quota_us", str(quota))]
        else:
            out += [("cpu", "cpu.max", f"{quota} {CPU_PERIOD_US}")]
    if limits.pids is not None:
        out += [("pids", "pids.max", str(limits.pids))]  # the same file in both versions
    return out


def oom_kills(events_text: str) -> int:
    """The ``oom_kill N`` count of v1's memory.oom_control or v2's memory.events."""
    m = re.search(r"^oom_kill (\d+)$", events_text, re.MULTILINE)
    return int(m.group(1)) if m else 0



def _write(path: Path, value: str) -> None:
    with path.open("w") as f:
        f.write(value)


def _hand_down(directory: Path, controllers: tuple[str, ...]) -> None:
    """v2: give `directory`'s children the controllers (only a group without processes of its own may)."""
    enabled = (directory / "cgroup.subtree_control").read_text().split()
    wanted = [f"+{c}" for c in controllers if c not in enabled]
    if wanted:
        _write(directory / "cgroup.subtree_control", " ".join(wanted))


def _enable_v2_controllers(base: Path, controllers: tuple[str, ...]) -> None:
    # Children of `base` get a controller only if `base` and its parent hand it down.
    base.mkdir(exist_ok=True)
    for directory in (base.parent, base):
        _hand_down(directory, controllers)


def _write_limits(version: int, dirs: dict[str, Path], limits: Limits) -> None:
    for controller, filename, value in limit_files(version, limits):
        path = dirs[controller] / filename
        if filename.startswith("memory.memsw") and not path.exists():
            continue  # no swap accounting on this host: nothing to swap to is limited either way
        _write(path, value)


def _level(hierarchy: Hierarchy, relative: str, pids: bool) -> dict[str, Path]:
    """controller -> the directory of the group at `relative` beneath our folder, made if missing."""
    if hierarchy.version == 2:
        directory = hierarchy.memory / relative
        directory.mkdir(exist_ok=True)
        return {"memory": directory, "cpu": directory, "pids": directory}
    dirs = {"memory": hierarchy.memory / relative, "cpu": hierarchy.cpu / relative}
    if pids and hierarchy.pids is not None:
        dirs["pids"] = hierarchy.pids / relative
    if hierarchy.cpuacct is not None:
        dirs["cpuacct"] = hierarchy.cpuacct / relative
    for directory in dirs.values():
        directory.mkdir(exist_ok=True)
    return dirs


def create(hierarchy: Hierarchy, name: str, limits: Limits, within: Enclosing | None = None) -> Group:
    """Make the cgroup ``name`` with ``limits`` (inside ``within``, made or kept with its limits); raises
    OSError where the host does not let us."""
    pids = hierarchy.pids is not None and limits.pids is not None
    controllers = ("memory", "cpu", "pids") if pids else ("memory", "cpu")
    if hierarchy.version == 2:
        _enable_v2_controllers(hierarchy.memory, controllers)
    else:
        for top in (hierarchy.memory, hierarchy.cpu, hierarchy.pids if pids else None, hierarchy.cpuacct):
            if top is not None:
                top.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            dirs, enclosing = _made(hierarchy, name, limits, within, pids, controllers)
            break
        except FileNotFoundError:
            # The enclosing group was removed (by its last process's supervisor) between making it and
            # making ours in it: make both again.
            if attempt == 2:
                raise
    if hierarchy.version == 2:
        events, cpu_usage = dirs["memory"] / "memory.events", dirs["cpu"] / "cpu.stat"
        memory_peak = dirs["memory"] / "memory.peak"
    else:
        events = dirs["memory"] / "memory.oom_control"
        cpu_usage = dirs.get("cpuacct", dirs["cpu"]) / "cpuacct.usage"  # with cpu, or its own hierarchy
        memory_peak = dirs["memory"] / "memory.max_usage_in_bytes"
    pids_events = dirs["pids"] / "pids.events" if pids else None
    return Group(tuple(dict.fromkeys(dirs.values())), events, pids_events, cpu_usage, memory_peak, enclosing)


def _made(
    hierarchy: Hierarchy, name: str, limits: Limits, within: Enclosing | None, pids: bool,
    controllers: tuple[str, ...],
) -> tuple[dict[str, Path], tuple[Path, ...]]:  # fmt: skip
    enclosing: tuple[Path, ...] = ()
    relative = name
    if within is not None:
        outer = _level(hierarchy, within.name, pids)
        outer_limits = within.limits if pids else Limits(within.limits.memory_bytes, within.limits.cpus)
        _write_limits(hierarchy.version, outer, outer_limits)
        if hierarchy.version == 2:
            _hand_down(outer["memory"], controllers)
        enclosing = tuple(dict.fromkeys(outer.values()))
        relative = f"{within.name}/{name}"
    dirs = _level(hierarchy, relative, pids)
    _write_limits(hierarchy.version, dirs, limits if pids else Limits(limits.memory_bytes, limits.cpus))
    return dirs, enclosing


def live_files(hierarchy: Hierarchy, name: str) -> tuple[Path, Path]:
    """(cpu time used, memory in use now) of the group ``name``: v2 cpu.stat and memory.current, v1
    cpuacct.usage (where cpuacct is, with cpu or apart) and memory.usage_in_bytes."""
    if hierarchy.version == 2:
        return hierarchy.memory / name / "cpu.stat", hierarchy.memory / name / "memory.current"
    cpu = (hierarchy.cpuacct or hierarchy.cpu) / name / "cpuacct.usage"
    return cpu, hierarchy.memory / name / "memory.usage_in_bytes"


def remove(group: Group) -> None:
    for directory in group.dirs + group.enclosing:  # the enclosing group only once it is empty
        with contextlib.suppress(OSError):
            directory.rmdir()


@functools.cache
def usable() -> tuple[Hierarchy | None, str]:
    """(where to make groups, "") when this worker can enforce limits, else (None, why not); once."""
    try:
        own = Path("/proc/self/cgroup").read_text()
    except OSError as exc:
        return None, f"cannot read /proc/self/cgroup: {exc}"
    hierarchy = detect(Path("/sys/fs/cgroup"), own)
    if hierarchy is None:
        return None, "no cgroup v1 memory+cpu or v2 hierarchy under /sys/fs/cgroup"
    try:
        group = create(hierarchy, f"probe-{os.getpid()}", Limits(memory_bytes=1 << 30, cpus=Decimal(1)))
    except OSError as exc:
        return None, f"cgroup v{hierarchy.version} at {hierarchy.memory} is not writable: {exc.strerror or exc}"
    remove(group)
    return hierarchy, ""
