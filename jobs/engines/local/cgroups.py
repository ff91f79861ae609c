"""CPU, memory and process-count limits for local job processes: one cgroup per process, v1 (as root) or v2.

No PyPI library covers both hierarchies (cgroupspy is v1 only), and the job needs four files, so this
is small: find where this worker may make cgroups, make one with the limits, and let the process's
supervisor join it, count OOM kills and remove it (see processes.py).
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
class Group:
    """One process's cgroup: the directories to join and remove, where OOM kills are counted and where
    refused forks are (pids.events' ``max``; None without a pids controller)."""

    dirs: tuple[Path, ...]
    events: Path
    pids_events: Path | None = None
    cpu_usage: Path | None = None  # v2 cpu.stat (usage_usec), v1 cpuacct.usage (ns): the accounting's cpu used
    memory_peak: Path | None = None  # v2 memory.peak, v1 memory.max_usage_in_bytes: its peak memory

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


def _enable_v2_controllers(base: Path, controllers: tuple[str, ...]) -> None:
    # Children of `base` get a controller only if `base` and its parent hand it down.
    base.mkdir(exist_ok=True)
    for directory in (base.parent, base):
        enabled = (directory / "cgroup.subtree_control").read_text().split()
        wanted = [f"+{c}" for c in controllers if c not in enabled]
        if wanted:
            _write(directory / "cgroup.subtree_control", " ".join(wanted))


def create(hierarchy: Hierarchy, name: str, limits: Limits) -> Group:
    """Make the cgroup ``name`` with ``limits``; raises OSError where the host does not let us."""
    pids = hierarchy.pids is not None and limits.pids is not None
    if hierarchy.version == 2:
        _enable_v2_controllers(hierarchy.memory, ("memory", "cpu", "pids") if pids else ("memory", "cpu"))
        directory = hierarchy.memory / name
        directory.mkdir(exist_ok=True)
        dirs = {"memory": directory, "cpu": directory, "pids": directory}
        events = directory / "memory.events"
        cpu_usage, memory_peak = directory / "cpu.stat", directory / "memory.peak"
    else:
        dirs = {"memory": hierarchy.memory / name, "cpu": hierarchy.cpu / name}
        if pids and hierarchy.pids is not None:
            dirs["pids"] = hierarchy.pids / name
        if hierarchy.cpuacct is not None:
            dirs["cpuacct"] = hierarchy.cpuacct / name
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        events = dirs["memory"] / "memory.oom_control"
        cpu_usage = dirs.get("cpuacct", dirs["cpu"]) / "cpuacct.usage"  # with cpu, or its own hierarchy
        memory_peak = dirs["memory"] / "memory.max_usage_in_bytes"
    if not pids:
        limits = Limits(limits.memory_bytes, limits.cpus)  # no pids controller here: cpu and memory only
    for controller, filename, value in limit_files(hierarchy.version, limits):
        path = dirs[controller] / filename
        if filename.startswith("memory.memsw") and not path.exists():
            continue  # no swap accounting on this host: nothing to swap to is limited either way
        _write(path, value)
    pids_events = dirs["pids"] / "pids.events" if pids else None
    return Group(tuple(dict.fromkeys(dirs.values())), events, pids_events, cpu_usage, memory_peak)


def live_files(hierarchy: Hierarchy, name: str) -> tuple[Path, Path]:
    """(cpu time used, memory in use now) of the group ``name``: v2 cpu.stat and memory.current, v1
    cpuacct.usage (where cpuacct is, with cpu or apart) and memory.usage_in_bytes."""
    if hierarchy.version == 2:
        return hierarchy.memory / name / "cpu.stat", hierarchy.memory / name / "memory.current"
    cpu = (hierarchy.cpuacct or hierarchy.cpu) / name / "cpuacct.usage"
    return cpu, hierarchy.memory / name / "memory.usage_in_bytes"


def remove(group: Group) -> None:
    for directory in group.dirs:
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
