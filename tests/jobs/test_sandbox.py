"""The sandbox's command line, the host facts it is built from, and cgroup limits, as plain functions."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from datacenters.models import Datacenter
from jobs.checks import unsandboxed_datacenters
from jobs.engines.base import EngineError
from jobs.engines.local import cgroups, network, sandbox
from jobs.engines.local import world as local_world
from jobs.engines.local.engine import LocalEngine
from jobs.engines.local.sandbox import Bind, Sandbox
from storage import paths


def _sandbox(root: bool) -> Sandbox:
    return Sandbox(
        bwrap="/usr/bin/bwrap",
        uid=65534,
        gid=65534,
        worker_is_root=root,
        cwd="/pfs/local/home/alice/jobs/fit",
        system=(Bind(Path("/usr"), "/usr"),),
        symlinks=(("usr/lib", "/lib"),),
        runtime=(Path("/opt/py/3.11"),),
        building=(Path("/root/.cache/pc/layers/s/user-1/k1"), Path("/root/.cache/pc/layers/s/user-1/k1.lock")),
        read_write=(Bind(Path("/srv/pfs/home/alice"), "/pfs/local/home/alice"),),
        read_only=(Bind(Path("/srv/pfs/public"), "/pfs/local/public"),),
        devices=(Path("/dev/nvidia0"),),
        etc=Path("/var/pc/sandbox/etc"),
        enter=("/usr/bin/nsenter", "--user=/proc/42/ns/user", "--net=/proc/42/ns/net", "--preserve-credentials", "--"),
    )


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_a_root_worker_drops_to_the_job_uid_with_setpriv() -> None:
    argv = sandbox.command(_sandbox(root=True), ["python", "-m", "paddlecloud.runtime.launcher"])
    assert "--unshare-user" not in argv
    tail = argv[argv.index("--chdir") + 3 :]
    assert tail[:4] == ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    assert tail[-3:] == ["python", "-m", "paddlecloud.runtime.launcher"]


def test_an_unprivileged_worker_maps_the_job_uid_in_a_user_namespace() -> None:
    argv = sandbox.command(_sandbox(root=False), ["true"])
    assert argv[argv.index("--uid") + 1] == "65534" and "--unshare-user" in argv
    assert "--disable-userns" in argv  # no user namespaces of the job's own
    assert "setpriv" not in argv and argv[-2:] == ["--", "true"]


def test_every_process_joins_the_job_network_before_bwrap_and_sees_no_host_cgroups_or_resolver() -> None:
    argv = sandbox.command(_sandbox(root=True), ["true"])
    assert argv[:5] == list(_sandbox(root=True).enter) and argv[5] == "/usr/bin/bwrap"
    assert ("/var/pc/sandbox/etc/resolv.conf", "/etc/resolv.conf") in _pairs(argv, "--ro-bind")
    assert argv[argv.index("--tmpfs") + 1] == "/sys/fs/cgroup"


def test_the_job_gets_its_own_pid_ipc_uts_namespaces_and_dies_with_its_parent() -> None:
    argv = sandbox.command(_sandbox(root=True), ["true"])
    for flag in ("--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--die-with-parent"):
        assert flag in argv
    assert "--unshare-net" not in argv  # the job's network is joined by nsenter, shared by all its processes
    assert argv[argv.index("--info-fd") + 1] == sandbox.INFO_FD


def test_home_is_read_write_and_public_read_only_at_their_pfs_paths() -> None:
    argv = sandbox.command(_sandbox(root=True), ["true"])
    assert ("/srv/pfs/home/alice", "/pfs/local/home/alice") in _pairs(argv, "--bind")
    assert ("/srv/pfs/public", "/pfs/local/public") in _pairs(argv, "--ro-bind")
    assert ("/opt/py/3.11", "/opt/py/3.11") in _pairs(argv, "--ro-bind")
    # Of the layer cache, only the layer being installed and its lock: the user's other layers are not there.
    layer, lock = "/root/.cache/pc/layers/s/user-1/k1", "/root/.cache/pc/layers/s/user-1/k1.lock"
    assert (layer, layer) in _pairs(argv, "--bind") and (lock, lock) in _pairs(argv, "--bind")
    assert not any(src.endswith("user-1") for src, _ in _pairs(argv, "--bind") + _pairs(argv, "--ro-bind"))
    assert ("/dev/nvidia0", "/dev/nvidia0") in _pairs(argv, "--dev-bind")
    assert ("/var/pc/sandbox/etc/passwd", "/etc/passwd") in _pairs(argv, "--ro-bind")
    assert ("/var/pc/sandbox/etc/hosts", "/etc/hosts") in _pairs(argv, "--ro-bind")
    assert argv[argv.index("--hostname") + 1] == sandbox.HOSTNAME
    assert argv[argv.index("--chdir") + 1] == "/pfs/local/home/alice/jobs/fit"
    # Nothing of the host's root is bound whole.
    assert not any(src == "/" for src, _ in _pairs(argv, "--ro-bind") + _pairs(argv, "--bind"))


def test_parents_of_bound_paths_are_made_traversable_once() -> None:
    argv = sandbox.command(_sandbox(root=True), ["true"])
    made = [argv[i + 3] for i, a in enumerate(argv) if a == "--perms" and argv[i + 2] == "--dir"]
    assert made[:3] == ["/etc", "/opt", "/opt/py"]
    assert "/root" in made and "/pfs" in made and "/pfs/local/home" in made
    assert len(made) == len(set(made)) and "/usr" not in made


def test_system_binds_recreate_merged_usr_links_and_show_only_listed_etc(tmp_path: Path) -> None:
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")
    (tmp_path / "etc" / "ssl").mkdir(parents=True)
    for name in ("resolv.conf", "nsswitch.conf", "shadow", "paddlecloud.env"):
        (tmp_path / "etc" / name).write_text("x")
    binds, links = sandbox.system_binds(tmp_path)
    targets = {b.target for b in binds}
    assert {"/usr", "/etc/ssl", "/etc/nsswitch.conf"} <= targets
    # The host's resolver may be a loopback one the job cannot reach: the job's is generated.
    assert "/etc/shadow" not in targets and "/etc/paddlecloud.env" not in targets and "/etc/resolv.conf" not in targets
    assert links == (("usr/lib", "/lib"),)


def test_identity_files_name_the_job_user(tmp_path: Path) -> None:
    passwd, group = sandbox.identity_lines(1234, 2345)
    assert "job:x:1234:2345:job:/tmp:/usr/sbin/nologin" in passwd.splitlines()
    assert "job:x:2345:" in group.splitlines()
    (tmp_path / "hosts").write_text("127.0.0.1 localhost\n")
    directory = sandbox.identity_files(tmp_path / "etc", 65534, 65534, "nameserver 10.0.2.3\n", tmp_path / "hosts")
    assert (directory / "resolv.conf").read_text() == "nameserver 10.0.2.3\n"
    assert (directory / "hosts").read_text() == f"127.0.0.1 localhost\n127.0.0.1\t{sandbox.HOSTNAME}\n"
    assert (directory / "passwd").read_text().count("65534") == 2
    assert oct((directory / "group").stat().st_mode & 0o777) == "0o644"


def test_identity_files_written_by_many_threads_at_once_all_succeed(tmp_path: Path) -> None:
    # Two workers of one user start at once on a worker's threads; a temp name made of the pid alone
    # let one writer's replace() remove the file under the other (a FileNotFoundError in CI).
    (tmp_path / "hosts").write_text("127.0.0.1 localhost\n")
    start = threading.Barrier(8)
    failures: list[BaseException] = []

    def write() -> None:
        for round_ in range(30):
            start.wait()  # every round, all threads find a fresh directory with nothing in it, and write
            try:
                resolv = "nameserver 10.0.2.3\n"
                sandbox.identity_files(tmp_path / f"etc{round_}", 4321, 4321, resolv, tmp_path / "hosts")
            except OSError as error:
                failures.append(error)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # and no temp file is left behind
    left = sorted(p.name for p in (tmp_path / "etc29").iterdir())
    assert left == ["empty", "group", "hosts", "passwd", "resolv.conf"]


def test_places_map_host_paths_to_pfs_paths(tmp_path: Path) -> None:
    where = paths.Places(
        tmp_path, tmp_path / "home" / "alice", tmp_path / "public", "/pfs/dc/home/alice", "/pfs/dc/public"
    )
    assert where.inside(tmp_path / "home" / "alice" / "jobs" / "fit") == "/pfs/dc/home/alice/jobs/fit"
    assert where.inside(tmp_path / "public") == "/pfs/dc/public"
    try:
        where.inside(tmp_path / "home" / "bob")
    except ValueError:
        pass
    else:
        raise AssertionError("bob's home must not map into alice's sandbox")


def test_limits_come_from_the_spec_per_role() -> None:
    spec: dict[str, object] = {"cpu": "500m", "memory": "1Gi", "pscpu": "2", "psmemory": "256Mi"}
    assert local_world.limits(spec, "trainer", 1024) == cgroups.Limits(1 << 30, Decimal("0.5"), 1024)
    assert local_world.limits(spec, "pserver", None) == cgroups.Limits(256 << 20, Decimal(2))


def test_limit_files_for_each_cgroup_version() -> None:
    limits = cgroups.Limits(memory_bytes=1 << 30, cpus=Decimal("1.5"))
    assert cgroups.limit_files(1, limits) == [
        ("memory", "memory.limit_in_bytes", str(1 << 30)),
        ("memory", "memory.memsw.limit_in_bytes", str(1 << 30)),
        ("cpu", "cpu.cfs_period_us", "100000"),
        ("cpu", "cpu.cfs_quota_us", "150000"),
    ]
    assert cgroups.limit_files(2, limits) == [
        ("memory", "memory.max", str(1 << 30)),
        ("memory", "memory.swap.max", "0"),
        ("cpu", "cpu.max", "150000 100000"),
    ]
    assert cgroups.limit_files(2, cgroups.Limits(cpus=Decimal("0.001"))) == [("cpu", "cpu.max", "1000 100000")]
    assert cgroups.limit_files(1, cgroups.Limits(pids=1024)) == [("pids", "pids.max", "1024")]


def test_detect_finds_v1_under_our_own_groups_and_v2_unified(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "cpu").mkdir()
    own = "4:memory:/box/1\n1:cpu,cpuacct:/\n0::/\n"
    assert cgroups.own_paths(own) == {"memory": "/box/1", "cpu": "/", "cpuacct": "/", "": "/"}
    assert cgroups.detect(v1, own) == cgroups.Hierarchy(1, v1 / "memory/box/1/paddlecloud", v1 / "cpu/paddlecloud")
    (v1 / "pids").mkdir()
    assert cgroups.detect(v1, own + "8:pids:/box\n") == cgroups.Hierarchy(
        1, v1 / "memory/box/1/paddlecloud", v1 / "cpu/paddlecloud", v1 / "pids/box/paddlecloud"
    )
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    base = v2 / "worker/paddlecloud"
    assert cgroups.detect(v2, "0::/worker\n") == cgroups.Hierarchy(2, base, base)
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    assert cgroups.detect(v2, "0::/worker\n") == cgroups.Hierarchy(2, base, base, base)
    assert cgroups.detect(tmp_path / "none", own) is None


def test_v1_cpu_time_is_counted_in_cpuacct_where_it_is_mounted_apart(tmp_path: Path) -> None:
    for controller in ("memory", "cpu", "cpuacct"):
        (tmp_path / controller).mkdir()
    own = "4:memory:/box\n1:cpu:/\n2:cpuacct:/acct\n"
    hierarchy = cgroups.detect(tmp_path, own)
    assert hierarchy is not None and hierarchy.cpuacct == tmp_path / "cpuacct/acct/paddlecloud"
    group = cgroups.create(hierarchy, "fit-trainer-0", cgroups.Limits(64 << 20, Decimal(1)))
    assert group.cpu_usage == tmp_path / "cpuacct/acct/paddlecloud/fit-trainer-0/cpuacct.usage"
    assert tmp_path / "cpuacct/acct/paddlecloud/fit-trainer-0/cgroup.procs" in group.procs  # the process joins it
    assert group.memory_peak == tmp_path / "memory/box/paddlecloud/fit-trainer-0/memory.max_usage_in_bytes"


def test_create_writes_v1_limits_and_skips_absent_swap_accounting(tmp_path: Path) -> None:
    hierarchy = cgroups.Hierarchy(1, tmp_path / "memory" / "paddlecloud", tmp_path / "cpu" / "paddlecloud")
    group = cgroups.create(hierarchy, "fit-trainer-0", cgroups.Limits(64 << 20, Decimal(1)))
    memory = tmp_path / "memory" / "paddlecloud" / "fit-trainer-0"
    assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert not (memory / "memory.memsw.limit_in_bytes").exists()
    assert (tmp_path / "cpu" / "paddlecloud" / "fit-trainer-0" / "cpu.cfs_quota_us").read_text() == "100000"
    assert group.events == memory / "memory.oom_control" and memory / "cgroup.procs" in group.procs
    assert group.pids_events is None  # no pids controller in this hierarchy: no pids limit, no error
    with_pids = cgroups.Hierarchy(1, hierarchy.memory, hierarchy.cpu, tmp_path / "pids" / "paddlecloud")
    group = cgroups.create(with_pids, "fit-trainer-1", cgroups.Limits(pids=64))
    assert (tmp_path / "pids" / "paddlecloud" / "fit-trainer-1" / "pids.max").read_text() == "64"
    assert group.pids_events == tmp_path / "pids" / "paddlecloud" / "fit-trainer-1" / "pids.events"


def test_a_workers_group_sits_in_its_users_group_which_bounds_them_together(tmp_path: Path) -> None:
    """v1 and v2 on fake trees: the user's group gets pids.max, the worker's group is inside it, and the user's
    group goes only once its last worker's group has (the real kernel: tests/jobs/test_isolation.py)."""
    user = cgroups.Enclosing("user-7", cgroups.Limits(pids=8192))
    v1 = cgroups.Hierarchy(1, tmp_path / "memory/pc", tmp_path / "cpu/pc", tmp_path / "pids/pc")
    first = cgroups.create(v1, "fit-trainer-0-0", cgroups.Limits(64 << 20, Decimal(1), pids=1024), user)
    second = cgroups.create(v1, "fit-trainer-1-0", cgroups.Limits(pids=1024), user)
    assert (tmp_path / "pids/pc/user-7/pids.max").read_text() == "8192"
    assert (tmp_path / "pids/pc/user-7/fit-trainer-0-0/pids.max").read_text() == "1024"
    assert (tmp_path / "memory/pc/user-7/fit-trainer-0-0/memory.limit_in_bytes").read_text() == str(64 << 20)
    assert tmp_path / "pids/pc/user-7/fit-trainer-0-0/cgroup.procs" in first.procs
    assert first.pids_events == tmp_path / "pids/pc/user-7/fit-trainer-0-0/pids.events"
    assert set(first.enclosing) == {tmp_path / f"{c}/pc/user-7" for c in ("memory", "cpu", "pids")}
    cgroups.remove(first)  # files a fake tree keeps stop rmdir; a real cgroup folder has none of its own
    assert (tmp_path / "pids/pc/user-7").is_dir() and second.dirs

    v2_root = tmp_path / "v2"
    (v2_root / "worker/pc").mkdir(parents=True)
    for directory in (v2_root / "worker", v2_root / "worker/pc"):
        (directory / "cgroup.subtree_control").write_text("")
    (v2_root / "worker/pc/user-7").mkdir()
    (v2_root / "worker/pc/user-7/cgroup.subtree_control").write_text("")
    base = v2_root / "worker/pc"
    group = cgroups.create(cgroups.Hierarchy(2, base, base, base), "fit-trainer-0-0", cgroups.Limits(pids=64), user)
    assert (base / "user-7/pids.max").read_text() == "8192"
    assert (base / "user-7/fit-trainer-0-0/pids.max").read_text() == "64"
    # Handed down at each level (a fake file keeps the last write): the user's group gives its children pids.
    assert "+pids" in (base / "user-7/cgroup.subtree_control").read_text()
    assert group.enclosing == (base / "user-7",)


def test_oom_kills_are_read_from_either_version() -> None:
    assert cgroups.oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n") == 2
    assert cgroups.oom_kills("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n") == 1
    assert cgroups.oom_kills("") == 0


def test_without_a_sandbox_jobs_are_refused_unless_the_datacenter_allows_it(
    local_dc: Datacenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "probe", lambda: sandbox.Probe(None, "bubblewrap (bwrap) is not installed", 0.0))
    with pytest.raises(EngineError, match=r"bubblewrap \(bwrap\) is not installed.*run without sandbox"):
        LocalEngine(local_dc).supervisor.sandbox_probe()
    local_dc.run_without_sandbox = True
    assert LocalEngine(local_dc).supervisor.sandbox_probe() is None
    local_dc.save()
    warnings = unsandboxed_datacenters()
    assert [w.id for w in warnings] == ["paddlecloud.W010"] and "'local'" in warnings[0].msg


def test_a_job_network_with_egress_refuses_the_host_and_every_private_range() -> None:
    rules = network.ruleset(egress=True, host_nets=["192.0.2.0/24"])
    blocked = rules.split("ip daddr {", 1)[1].split("}", 1)[0]
    for cidr in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "192.0.2.0/24"):
        assert cidr in blocked
    assert 'oifname "lo" accept' in rules and f"ip daddr {network.SLIRP_DNS}" in rules
    assert "meta nfproto ipv6 reject" in rules
    # Closed: the namespace has only its loopback, so nothing is there to refuse.
    assert network.ruleset(egress=False, host_nets=["192.0.2.0/24"]) == ""
    assert network.resolv_conf(True) == f"nameserver {network.SLIRP_DNS}\n"
    assert "nameserver" not in network.resolv_conf(False)


def test_processes_join_the_job_network_keeping_their_ids() -> None:
    assert network.enter_argv("/usr/bin/nsenter", 42) == [
        "/usr/bin/nsenter",
        "--user=/proc/42/ns/user",
        "--net=/proc/42/ns/net",
        "--preserve-credentials",
        "--",
    ]


@pytest.mark.django_db
def test_each_user_has_a_job_uid_of_their_own_never_a_host_account(settings: Any) -> None:
    settings.PADDLECLOUD_JOB_UID_BASE = 1_000_000_000
    assert local_world.job_ids(7) == (1_000_000_007, 1_000_000_007)
    assert local_world.job_ids(7) != local_world.job_ids(8)
    settings.PADDLECLOUD_JOB_UID_BASE = 1000
    with pytest.raises(EngineError, match="host account 'root'"):
        local_world.job_ids(-1000)
    settings.PADDLECLOUD_JOB_UID_BASE = 2**31 - 2
    with pytest.raises(EngineError, match="past the job uid range"):
        local_world.job_ids(5)
