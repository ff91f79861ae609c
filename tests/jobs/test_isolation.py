"""Cross-user isolation on the local engine: alice's job, as an attacker, against the host and bob's job.

Real jobs in the real sandbox through a real worker: each job gets a network of its own (network.py),
a uid of its owner's own, and a process limit; the assertions read what the attacking job printed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.local import network, sandbox
from jobs.models import Job
from tests.jobs.conftest import put_package
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("needs_sandbox")]

# Everything an attacker inside a job would try: list the ports it can see, then connect to each target.
ATTACK = r"""
import os, socket, sys
print("uid", os.getuid(), flush=True)
listening = set()
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        for line in open(name).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                listening.add(int(fields[1].rsplit(":", 1)[1], 16))
    except OSError:
        pass
print("listening", sorted(listening), flush=True)
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        print("CONNECTED", target, flush=True)
    except OSError as exc:
        print("refused", target, type(exc).__name__, flush=True)
"""

FORK_STORM = r"""
import subprocess, sys
children = []
try:
    for _ in range(300):
        # Each child lives (a shell waiting on sleep) and names itself by $0; its output stays off our log.
        children.append(subprocess.Popen(
            ["/bin/sh", "-c", "sleep 300; :", "forkstorm-marker"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
except OSError as exc:
    print("fork refused after", len(children), exc, flush=True)
    sys.exit(1)
print("forked", len(children), flush=True)
"""


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A service of the host on every address, as PostgreSQL or Redis may be."""
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))  # noqa: S104 - the point: a host service no job may reach
        server.listen()
        yield int(server.getsockname()[1])


def _package(datacenter: Datacenter, user: User, name: str, script: str) -> None:
    package = Path(datacenter.storage_root) / "home" / user.username / "jobs" / name
    package.mkdir(parents=True)
    (package / "job.py").write_text(script)


def _log(job: Job, worker: str = "trainer_0") -> str:
    home = Path(job.datacenter.storage_root) / "home" / job.owner.username
    return (home / "jobs" / job.name / "output" / job.uid / worker / "log.txt").read_text()


def _host_addresses() -> list[str]:
    return [
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]


def _running(name: str, worker: WorkerProcess) -> Job:
    def up() -> Job | None:
        job = Job.objects.filter(name=name).first()
        return job if job is not None and job.state == "running" else None

    job = wait_for(up, f"job {name} to run", 90, watch=worker)
    assert isinstance(job, Job)
    return job


def _submit(api: APIClient, spec: dict[str, Any]) -> None:
    created = api.post("/api/v1/jobs", {"parallelism": 1, "pservers": 0, **spec}, format="json")
    assert created.status_code == 201, created.json()


def test_a_job_reaches_neither_the_hosts_services_nor_another_users_job_but_the_outside_world(
    alice_api: APIClient,
    bob_api: APIClient,
    alice: User,
    bob: User,
    local_dc: Datacenter,
    worker: WorkerProcess,
    host_listener: int,
) -> None:
    # bob's job: 2 pservers listening, 2 trainers at work, gloo's port reserved.
    put_package(local_dc, bob, "bobs", Path(__file__).parent / "fake_package")
    bobs = {"jobname": "bobs", "entry": "python train.py", "parallelism": 2, "pservers": 2}
    _submit(bob_api, {**bobs, "env": {"FAKE_STEPS": "900", "FAKE_STEP_SECONDS": "0.2"}})
    bob_job = _running("bobs", worker)
    bob_ports = [*bob_job.engine_data["ports"]["pservers"], bob_job.engine_data["ports"]["gloo"]]
    targets = [f"127.0.0.1:{host_listener}", f"10.0.2.2:{host_listener}"]
    targets += [f"{address}:{host_listener}" for address in _host_addresses()]
    targets += [f"127.0.0.1:{port}" for port in (*bob_ports, 6379, 5432, 8000)]
    targets += ["pypi.org:443"]  # the outside world: allowed (the datacenter's default egress)

    _package(local_dc, alice, "attack", ATTACK)
    _submit(alice_api, {"jobname": "attack", "entry": "python job.py " + " ".join(targets)})
    job = finished("attack", worker)
    log = _log(job)
    assert job.state == "succeeded", log
    for target in targets[:-1]:
        assert f"refused {target} " in log, log
    assert "CONNECTED pypi.org:443" in log, log
    seen = eval(log.split("listening ", 1)[1].splitlines()[0])  # noqa: S307 - the job printed a list of ints
    assert host_listener not in seen and not set(bob_ports) & set(seen), log
    assert f"uid {settings.PADDLECLOUD_JOB_UID_BASE + alice.pk}\n" in log  # alice's own uid, not bob's
    bob_job.refresh_from_db()
    assert bob_job.state == "running"  # untouched by the attack
    assert bob_api.delete("/api/v1/jobs/bobs").status_code == 200
    finished("bobs", worker)


def test_without_egress_a_job_reaches_nothing_outside_itself(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    local_dc.job_egress = False
    local_dc.save()
    _package(local_dc, alice, "closed", ATTACK + "\nprint(open('/etc/resolv.conf').read())\n")
    _submit(alice_api, {"jobname": "closed", "entry": "python job.py pypi.org:443 203.0.113.80:443"})
    job = finished("closed", worker)
    log = _log(job)
    assert job.state == "succeeded", log
    assert "refused pypi.org:443 gaierror" in log and "refused 203.0.113.80:443 " in log, log
    assert "nameserver" not in log


def test_a_fork_storm_is_capped_fails_the_job_and_leaves_nothing(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    local_dc.job_pids_limit = 64
    local_dc.save()
    _package(local_dc, alice, "storm", FORK_STORM)
    _submit(alice_api, {"jobname": "storm", "entry": "python job.py"})
    job = finished("storm", worker)
    log = _log(job)
    assert "fork refused after" in log, log
    refused_after = int(log.split("fork refused after ", 1)[1].split()[0])
    assert refused_after < 64, log
    assert (job.state, job.reason) == ("failed", "PidsLimit"), job.message
    assert "limit of 64 processes" in job.message

    def no_stragglers() -> bool:
        for process in psutil.process_iter(["cmdline"]):
            if "forkstorm-marker" in (process.info["cmdline"] or []):
                return False
        return True

    wait_for(no_stragglers, "the fork storm's processes to be gone", 30)


# Every trainer waits until all have started, forks up to `forks` children (under its own cap), says how many it
# got, then waits until every trainer has forked: at that moment all the job's children live at once.
USER_STORM = r"""
import os, resource, subprocess, sys, time
trainers, forks, rank = int(sys.argv[1]), int(sys.argv[2]), os.environ["PADDLE_TRAINER_ID"]
print("nproc", resource.getrlimit(resource.RLIMIT_NPROC)[0], flush=True)

def barrier(name):
    os.makedirs(name, exist_ok=True)
    open("%s/%s" % (name, rank), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(name)) < trainers and time.monotonic() < deadline:
        time.sleep(0.2)
    return len(os.listdir(name))

barrier("started")
children, refused = [], ""
try:
    for _ in range(forks):
        children.append(subprocess.Popen(
            ["/bin/sh", "-c", "sleep 300; :", "userstorm-marker"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
except OSError as exc:
    refused = "refused errno %d" % exc.errno
print("forked", len(children), refused, flush=True)
print("all forked", barrier("forked"), flush=True)
"""


def test_one_users_workers_share_a_process_bound_and_another_users_job_runs_beside(
    alice_api: APIClient, bob_api: APIClient, alice: User, bob: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """Issue 34: the per-worker cap alone let a 32-trainer job hold 32 x 1,024 processes (this host's pid_max).
    Now all of a user's workers on a host share user_pids_limit (a cgroup above them, and RLIMIT_NPROC of the
    user's job uid): 8 trainers that each want 40 children, under their own cap of 64, get far fewer."""
    trainers, forks, user_limit = 8, 40, 200
    local_dc.job_pids_limit, local_dc.user_pids_limit = 64, user_limit
    local_dc.save()
    _package(local_dc, alice, "storm", USER_STORM)
    _submit(alice_api, {"jobname": "storm", "entry": f"python job.py {trainers} {forks}", "parallelism": trainers})
    storm = _running("storm", worker)
    _package(local_dc, bob, "calm", "print('calm and done', flush=True)\n")
    _submit(bob_api, {"jobname": "calm", "entry": "python job.py"})
    calm = finished("calm", worker, timeout=120)
    assert calm.state == "succeeded", calm.message
    assert "calm and done" in _log(calm)

    storm = finished("storm", worker, timeout=240)
    logs = [_log(storm, f"trainer_{rank}") for rank in range(trainers)]
    counts = [int(log.split("forked ", 1)[1].split()[0]) for log in logs]
    assert all(f"all forked {trainers}" in log for log in logs), logs
    # Together under the user's bound (each trainer's own processes count too), where the per-worker caps
    # alone would have let 8 x 40 live; and refused at the user's bound, not at a trainer's own.
    assert sum(counts) < user_limit, counts
    assert any("refused errno 11" in log and count < forks for log, count in zip(logs, counts, strict=True)), logs
    if os.geteuid() == 0:  # a root worker's sandbox drops to the user's job uid, bounded by RLIMIT_NPROC too
        assert all(f"nproc {user_limit}\n" in log for log in logs), logs
    assert storm.state == "succeeded", storm.message


NONROOT_PROBE = r"""
import os, socket, subprocess, sys
print("uid", os.getuid(), flush=True)
with socket.socket() as own:  # the job's own loopback works: its peers meet there
    own.bind(("127.0.0.1", 0))
    own.listen()
    socket.create_connection(own.getsockname(), timeout=2).close()
    print("own loopback ok", flush=True)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    print("CONNECTED host", flush=True)
except OSError as exc:
    print("host refused", type(exc).__name__, flush=True)
print("userns", subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode, flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to an unprivileged uid to play a non-root worker")
def test_an_unprivileged_worker_gives_its_jobs_the_same_network(tmp_path: Path, host_listener: int) -> None:
    """The laptop case: the holder, nsenter and bwrap as an ordinary user (uid 65534 here)."""
    home = Path(tempfile.mkdtemp(prefix="nonroot-"))
    home.chmod(0o777)
    holder = home / "netholder.py"
    shutil.copy(network.HOLDER, holder)
    holder.chmod(0o755)
    (home / "probe.py").write_text(NONROOT_PROBE)
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    config = {
        "root": False, "uid": 1_000_000_001, "gid": 1_000_000_001, "egress": False, "rules": "",
        "nft": "", "slirp4netns": "", "ready": str(home / "ready.json"),
    }
    python = "/usr/bin/python3"  # the system's: an ordinary user may not read the worker's own Python
    started = subprocess.Popen([*drop, python, str(holder), json.dumps(config)], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (home / "ready.json").is_file(), "the unprivileged network holder", 20)
        netns_pid = int(json.loads((home / "ready.json").read_text())["pid"])
        system, links = sandbox.system_binds()
        probe = sandbox.probe()
        assert probe.bwrap is not None
        etc = sandbox.identity_files(home / "etc", 1_000_000_001, 1_000_000_001, network.resolv_conf(False))
        box = sandbox.Sandbox(
            probe.bwrap, 1_000_000_001, 1_000_000_001, False, str(home), system, links,
            runtime=(home,), etc=etc, enter=tuple(network.enter_argv(network.tools(False)["nsenter"], netns_pid)),
        )
        command = sandbox.command(box, [python, "probe.py", str(host_listener)])
        argv = [a if a != sandbox.INFO_FD else "2" for a in command]
        result = subprocess.run([*drop, *argv], capture_output=True, text=True, timeout=60, check=False)
    finally:
        started.kill()
        shutil.rmtree(home, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "uid 1000000001\n" in result.stdout and "own loopback ok" in result.stdout, result.stdout
    assert "host refused" in result.stdout and "userns 1" in result.stdout, result.stdout
