"""A hostile job on the local engine, beyond test_isolation: IPv6, slirp's own addresses, abstract unix
sockets, /proc, and what a kill leaves of the job's network.

Real jobs in the real sandbox through a real worker; the assertions read what the attacking job printed
and what is left on the host.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.engines.local import network, processes
from jobs.models import Job, JobState, Reason
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("needs_sandbox")]

# Connect to every target ("host:port", or "@name" for an abstract unix socket), list what /proc shows,
# then stay until killed.
ATTACK = r"""
import os, socket, sys, time
for target in sys.argv[1:]:
    try:
        if target.startswith("@"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(2)
                sock.connect("\0" + target[1:])
        else:
            host, port = target.rsplit(":", 1)
            socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
        print("CONNECTED", target, flush=True)
    except OSError as exc:
        print("refused", target, type(exc).__name__, flush=True)
abstract = [line.split()[-1] for line in open("/proc/net/unix").read().splitlines()[1:] if line.split()[-1][:1] == "@"]
print("abstract", sorted(abstract), flush=True)
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), flush=True)
print("holding", flush=True)
time.sleep(600)
"""

# Fails after a while, so the engine tries to start it again (max_retries).
FAIL_LATER = r"""
import time
print("started", flush=True)
time.sleep(6)
raise SystemExit(1)
"""

# Disk space a length never shows: 200 MiB allocated past the end of an empty file, in one call.
PREALLOCATE = r"""
import os, subprocess, time
path = os.path.join(os.environ["PADDLECLOUD_OUTPUT_DIR"], "hidden.bin")
open(path, "wb").close()
subprocess.run(["fallocate", "--keep-size", "-l", str(200 * 1024 * 1024), path], check=True)
print("preallocated", os.stat(path).st_size, os.stat(path).st_blocks * 512, flush=True)
time.sleep(120)
print("never stopped", flush=True)
"""


@pytest.fixture
def host_listener_v6() -> Iterator[int]:
    """A service of the host on every IPv4 and IPv6 address."""
    with socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True) as server:
        yield int(server.getsockname()[1])


@pytest.fixture
def host_abstract() -> Iterator[str]:
    """An abstract unix socket of the host, as systemd's or D-Bus's are."""
    name = f"paddlecloud-attack-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("\0" + name)
        server.listen()
        yield name


def _host_v6() -> list[str]:
    return [
        a.address.split("%")[0]
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET6 and not a.address.startswith("fe80")
    ]


def _log(job: Job) -> str:
    home = Path(job.datacenter.storage_root) / "home" / job.owner.username
    path = home / "jobs" / job.name / "output" / job.uid / "trainer_0" / "log.txt"
    return path.read_text() if path.is_file() else ""


def _once_logged(name: str, text: str, worker: WorkerProcess) -> Job:
    """Job `name` once its trainer has printed `text`."""

    def logged() -> Job | None:
        job = Job.objects.filter(name=name).first()
        return job if job is not None and text in _log(job) else None

    job = wait_for(logged, f"job {name} to print {text!r}", 90, watch=worker)
    assert isinstance(job, Job)
    return job


def _network_processes(job: Job) -> list[int]:
    """Host pids of the job's network: the holder, its namespace process, and slirp4netns on it."""
    record = job.engine_data["network"]
    pids = [p for p in (record["pid"], record["netns_pid"]) if processes.start_time(p) is not None]
    for process in psutil.process_iter(["cmdline"]):
        if f"/proc/{record['netns_pid']}/ns/net" in (process.info["cmdline"] or []):
            pids.append(process.pid)
    return pids


def test_a_job_reaches_no_host_service_over_ipv6_slirp_or_abstract_sockets_and_a_kill_ends_its_network(
    alice_api: APIClient,
    alice: User,
    local_dc: Datacenter,
    worker: WorkerProcess,
    host_listener_v6: int,
    host_abstract: str,
) -> None:
    port = host_listener_v6
    targets = [f"[::1]:{port}", *(f"[{a}]:{port}" for a in _host_v6())]
    # slirp's gateway (the host) and resolver on other ports than DNS, and the resolver's TCP 53 to the host.
    targets += [f"10.0.2.2:{port}", "10.0.2.2:22", "10.0.2.2:5432", "10.0.2.3:22", f"10.0.2.3:{port}"]
    targets += [f"@{host_abstract}"]
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "probe6"
    package.mkdir(parents=True)
    (package / "job.py").write_text(ATTACK)
    spec = {"jobname": "probe6", "entry": "python job.py " + " ".join(targets), "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201

    job = _once_logged("probe6", "holding", worker)
    log = _log(job)
    for target in targets:
        assert f"refused {target} " in log, log
    abstract = log.split("abstract ", 1)[1].splitlines()[0]
    assert host_abstract not in abstract, log  # the host's abstract names are not even listed
    pids = eval(log.split("pids ", 1)[1].splitlines()[0])  # noqa: S307 - the job printed a list of ints
    assert len(pids) <= 3, log  # its own pid namespace: the launcher, the entry, little else

    network = _network_processes(job)
    assert len(network) >= 3, network  # holder, namespace process, slirp4netns (egress is on by default)
    if os.geteuid() == 0:  # slirp4netns parses the job's packets as root: only the system calls it needs
        assert "Seccomp:\t2" in Path(f"/proc/{network[-1]}/status").read_text()
    assert alice_api.delete("/api/v1/jobs/probe6").status_code == 200
    finished("probe6", worker)
    wait_for(lambda: not [p for p in network if psutil.pid_exists(p)], "the job's network to be gone", 30)


def test_a_job_that_preallocates_past_a_files_end_is_stopped_for_the_storage_quota(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, storage="20Mi")
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "hide"
    package.mkdir(parents=True)
    (package / "job.py").write_text(PREALLOCATE)
    spec = {"jobname": "hide", "entry": "python job.py", "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("hide", worker, timeout=60)
    log = _log(job)
    assert "preallocated 0 " in log and "never stopped" not in log, log
    assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED), job.message
    assert "200.0 MiB allocated past their ends" in job.message, job.message


def test_a_job_whose_network_died_cannot_restart_a_trainer_and_says_how_the_network_ended(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "orphan"
    package.mkdir(parents=True)
    (package / "job.py").write_text(FAIL_LATER)
    spec = {"jobname": "orphan", "entry": "python job.py", "parallelism": 1, "pservers": 0, "max_retries": 1}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201

    job = _once_logged("orphan", "started", worker)
    processes.signal_groups([job.engine_data["network"]["pid"]], signal.SIGKILL)  # the holder and slirp4netns
    job = finished("orphan", worker, timeout=60)
    assert (job.state, job.reason) == (JobState.FAILED, Reason.BACKOFF_LIMIT), job.message
    assert job.message == (
        "trainer 0 exited with code 1 after 0 restart(s); cannot restart it: the job's network ended "
        "(its holder exited with code 137 (killed by SIGKILL)); its processes cannot join it"
    )


SWAP_WORKER_FOLDER = """\
import os, sys
from paddlecloud.contract.layout import worker_folder
mine = os.path.join(os.environ["PADDLECLOUD_OUTPUT_DIR"], worker_folder("trainer", 0))
os.rename(mine, mine + ".moved")
os.symlink("/tmp", mine)  # the engine's restart must not follow it, nor break on it
print("swapped", flush=True)
sys.exit(3)
"""


def test_a_job_that_breaks_its_own_worker_folder_fails_alone_and_the_others_go_on(
    alice_api: APIClient, bob_api: APIClient, alice: User, bob: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """Its restart meets a link where its folder was: that job fails, saying why; the datacenter's reconcile goes
    on, so bob's job, which ends meanwhile, is seen to end (the loop once stopped at the first such job)."""
    for owner, name, text in ((alice, "swap", SWAP_WORKER_FOLDER), (bob, "quiet", "import time\ntime.sleep(3)\n")):
        package = Path(local_dc.storage_root) / "home" / owner.username / "jobs" / name
        package.mkdir(parents=True)
        (package / "job.py").write_text(text)
    spec = {"entry": "python job.py", "parallelism": 1, "pservers": 0, "cpu": "0.5"}
    swap = {**spec, "jobname": "swap", "max_retries": 1}
    assert alice_api.post("/api/v1/jobs", swap, format="json").status_code == 201
    assert bob_api.post("/api/v1/jobs", {**spec, "jobname": "quiet"}, format="json").status_code == 201
    swapped = finished("swap", worker, timeout=90)
    assert (swapped.state, swapped.reason) == (JobState.FAILED, Reason.BACKOFF_LIMIT), swapped.message
    assert "exited with code 3" in swapped.message and "cannot restart it" in swapped.message, swapped.message
    quiet = finished("quiet", worker, timeout=90)
    assert quiet.state == JobState.SUCCEEDED, quiet.message


def test_a_network_holder_killed_alone_takes_its_namespace_and_slirp4netns_with_it(tmp_path: Path) -> None:
    """Only the holder's main process dies (the OOM killer's pick, say): nothing of the network may linger
    for the engine to take as alive."""
    held = network.start(tmp_path, 1_000_000_001, 1_000_000_001, egress=bool(network.egress_tools_missing() == ""))
    slirp = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if f"/proc/{held.netns_pid}/ns/net" in (p.info["cmdline"] or [])
    ]
    try:
        os.kill(held.spawned.pid, signal.SIGKILL)
        wait_for(
            lambda: not [p for p in (held.netns_pid, *slirp) if processes.start_time(p) is not None],
            "the namespace holder and slirp4netns to end with the holder",
            10,
        )
    finally:
        processes.signal_groups([held.spawned.pid], signal.SIGKILL)
