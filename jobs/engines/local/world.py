"""What one local job process sees and may use: its sandbox, its /pfs paths, its cgroup limits.

The same world as a pod's: the user's home read-write at `/pfs/<dc>/home/<user>`, the public area
read-only at `/pfs/<dc>/<public_path>`, the runtime read-only, a private /tmp, an unprivileged uid.
"""

from __future__ import annotations

import logging
import os
import pwd
from pathlib import Path

from django.conf import settings
from paddlecloud.contract import quantity

from datacenters.models import Datacenter
from jobs.engines.base import EngineError
from jobs.engines.local import cgroups, network, sandbox
from jobs.engines.local.runtimes import RuntimePaths
from storage.paths import Places

log = logging.getLogger(__name__)
_warned: set[str] = set()


def job_path(runtime: RuntimePaths) -> str:
    """PATH inside the sandbox: the job's runtime first, then the system's."""
    dirs = [str(Path(runtime.python).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join(dict.fromkeys(dirs))


# uids are 32-bit, and tools that store them signed stop at 2**31 - 1.
_LAST_UID = 2**31 - 2


def job_ids(user_id: int) -> tuple[int, int]:
    """The uid and gid every local job of portal user ``user_id`` runs as: PADDLECLOUD_JOB_UID_BASE
    plus the user's id, so /proc, signals, process counts and files separate users. Refused when it
    would pass the uid range or name an account of the host."""
    uid = settings.PADDLECLOUD_JOB_UID_BASE + user_id
    if uid > _LAST_UID:
        raise EngineError(f"user id {user_id} is past the job uid range (PADDLECLOUD_JOB_UID_BASE + id <= {_LAST_UID})")
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, uid
    raise EngineError(f"job uid {uid} is the host account {account!r}: move PADDLECLOUD_JOB_UID_BASE")


def egress(datacenter: Datacenter) -> bool:
    """Whether the datacenter's jobs get egress on this host: asked for, and slirp4netns and nft are here.
    Missing tools close the network rather than stop jobs (isolation never depends on them); said once."""
    if not datacenter.job_egress:
        return False
    missing = network.egress_tools_missing()
    if missing:
        warn_once("egress", f"local engine: jobs run WITHOUT egress: {missing}")
    return not missing


def build(
    datacenter: Datacenter,
    where: Places,
    cwd: str,
    probe: sandbox.Probe,
    runtime: RuntimePaths,
    devices: list[str],
    ids: tuple[int, int],
    enter: tuple[str, ...],
    egress: bool,
    sealed: tuple[tuple[int, str], ...] = (),
) -> sandbox.Sandbox:
    """The sandbox of one job process: its user's /pfs paths, its runtime (jobs.engines.local.runtimes) read-only,
    its GPUs, run as the user's own ids (``ids``, job_ids) in the job's network (``enter``, network.enter_argv;
    ``egress`` as that network was made), with ``sealed`` (sandbox.Sandbox.sealed) read-only over its folders.
    Nothing of the user's layer cache is writable to it: a layer it needs was built before it started."""
    return _world(datacenter, where, cwd, probe, runtime.readonly, (), devices, ids, enter, egress, sealed, True)


def layer_build(
    datacenter: Datacenter,
    where: Places,
    cwd: str,
    probe: sandbox.Probe,
    runtime: RuntimePaths,
    ids: tuple[int, int],
    enter: tuple[str, ...],
    egress: bool,
) -> sandbox.Sandbox:
    """The sandbox of a job's build step (paddlecloud.runtime.layer): the job's world with the home read-only too,
    and the one layer it installs (with its lock) the only thing it may write, beside its private /tmp."""
    assert runtime.building is not None
    building = (Path(runtime.building), Path(f"{runtime.building}.lock"))
    if os.geteuid() == 0:
        for path in building:  # made by the worker (runtimes._layer_to_build): the build's uid installs into it
            os.lchown(path, *ids)
    return _world(datacenter, where, cwd, probe, runtime.readonly, building, [], ids, enter, egress, (), False)


def _world(
    datacenter: Datacenter,
    where: Places,
    cwd: str,
    probe: sandbox.Probe,
    readonly: list[str],
    building: tuple[Path, ...],
    devices: list[str],
    ids: tuple[int, int],
    enter: tuple[str, ...],
    egress: bool,
    sealed: tuple[tuple[int, str], ...],
    home_writable: bool,
) -> sandbox.Sandbox:
    assert probe.bwrap is not None
    system, links = sandbox.system_binds()
    uid, gid = ids
    etc_dir = Path(settings.VAR_DIR) / "sandbox" / "etc" / f"{uid}-{'egress' if egress else 'closed'}"
    etc = sandbox.identity_files(etc_dir, uid, gid, network.resolv_conf(egress))
    home = sandbox.Bind(where.home, where.home_inside)
    public = sandbox.Bind(where.public, where.public_inside)
    return sandbox.Sandbox(
        bwrap=probe.bwrap,
        uid=uid,
        gid=gid,
        worker_is_root=os.geteuid() == 0,
        cwd=cwd,
        system=system,
        symlinks=links,
        runtime=tuple(Path(p) for p in dict.fromkeys(readonly)),
        building=building,
        read_write=(home,) if home_writable else (),
        read_only=(public,) if home_writable else (home, public),
        devices=tuple(Path(d) for d in devices),
        etc=etc,
        enter=enter,
        sealed=sealed,
    )


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", message)


def limits(spec: dict[str, object], role: str, pids: int | None) -> cgroups.Limits:
    """One worker's cgroup limits: the spec's cpu and memory for its role, the datacenter's pids limit."""
    cpu, memory = ("pscpu", "psmemory") if role == "pserver" else ("cpu", "memory")
    return cgroups.Limits(
        memory_bytes=quantity.byte_count(spec[memory], field=memory) if spec.get(memory) else None,
        cpus=quantity.cores(spec[cpu], field=cpu) if spec.get(cpu) else None,
        pids=pids,
    )


def group_name(uid: str, worker: str, restarts: int) -> str:
    """The cgroup of one run of a worker ("trainer-0"): a restart gets a fresh one (its counters start at 0)."""
    return f"{uid}-{worker}-{restarts}"


def user_group(owner_id: int, pids: int) -> cgroups.Enclosing:
    """The group of all of one user's workers on this host: its pids.max bounds them together."""
    return cgroups.Enclosing(user_group_name(owner_id), cgroups.Limits(pids=pids))


def user_group_name(owner_id: int) -> str:
    """The name of the user's group; a worker's group is `<this>/<group_name>` beneath the portal's folder."""
    return f"user-{owner_id}"


def cgroup(name: str, wanted: cgroups.Limits, within: cgroups.Enclosing | None = None) -> cgroups.Group | None:
    """A cgroup enforcing ``wanted`` (inside ``within``), or None (said once in the worker's log) where the host
    does not let this worker make one."""
    hierarchy, why = cgroups.usable()
    if hierarchy is None:
        warn_once("cgroups", f"local engine: cpu and memory limits are not enforced: {why}")
        return None
    try:
        return cgroups.create(hierarchy, name, wanted, within)
    except OSError as exc:
        warn_once("cgroups-create", f"local engine: could not make cgroup {name}: {exc}")
        return None


def host_report() -> str:
    """What this host gives local jobs, for the operators (admin, datacenter page)."""
    probe = sandbox.probe()
    box = f"sandbox: {probe.bwrap} works ({probe.seconds * 1000:.0f} ms per start)" if probe.ok else probe.error
    hierarchy, why = cgroups.usable()
    limits = f"limits: cgroup v{hierarchy.version} under {hierarchy.memory.parent}" if hierarchy else f"limits: {why}"
    missing = network.egress_tools_missing()
    net = f"egress: none ({missing})" if missing else "egress: slirp4netns behind nftables, where allowed"
    return f"{box}; {limits}; network: one per job; {net}"
