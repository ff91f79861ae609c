"""The local engine's supervisor: it spawns a job's processes (sandboxed, in the job's own network) and signals them.

It reports what it does to the domain's Recorder before it relies on it (a process as it starts, a
stop as it is asked), so any worker process finds the job's processes again; `fate` says what it sees
of one process, and the judge (judge.py) turns that into the job's state.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from paddlecloud.contract.jobenv import env_name
from paddlecloud.contract.layout import worker_folder
from paddlecloud.contract.states import worker_name
from paddlecloud.contract.units import free_ports

from datacenters.models import Datacenter
from jobs.engines.base import EngineError, Recorder, WorkerStatus
from jobs.engines.launch import Launch, Peers
from jobs.engines.local import gpus, joblog, network, processes, runtimes, sandbox
from jobs.engines.local import world as local_world
from jobs.files import layout
from jobs.files.logfiles import log_limit, open_log_fd
from jobs.models import Job, Role, Worker, WorkerState
from storage import paths

# Only these variables of the worker's own environment reach job processes: the worker's secrets
# (DATABASE_URL, SECRET_KEY, ...) must never.
_PASSED_THROUGH = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CACHE_DIR",
    "PIP_FIND_LINKS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


STOPPED_AFTER_SUCCESS = "stopped after every trainer succeeded"
LAYER_BUILD = "layer-build"  # the job's build step: its record in engine_data, its cgroup's and state folder's name
REQS = "requirements.txt"
HOST = "127.0.0.1"  # every process of a local job runs on the worker's host, in the job's own network


def status_of(worker: Worker) -> WorkerStatus:
    """What a worker's row (as the supervisor just changed it in memory) says, for the Recorder."""
    return WorkerStatus(
        role=Role(worker.role),
        index=worker.index,
        state=WorkerState(worker.state),
        host=worker.host,
        pid=worker.pid,
        started_at=worker.started_at,
        restarts=worker.restarts,
        exit_code=worker.exit_code,
        message=worker.message,
    )


def _fate(record: dict[str, Any], status_path: Path) -> tuple[bool, int | None]:
    """(still running, exit code once it ended) of a supervised process the engine recorded (Spawned.record)."""
    if processes.is_alive(record["pid"], record["pid_start"]):
        return True, None
    code = processes.exit_status(status_path)
    if code is None and processes.is_alive(record["supervisor"], record["supervisor_start"]):
        return True, None  # the process just ended; its supervisor is writing the status
    return False, code


class Supervisor:
    """The processes of the jobs of one local datacenter: where their files lie, how they start and stop."""

    def __init__(self, datacenter: Datacenter) -> None:
        self.datacenter = datacenter

    def output(self, job: Job) -> Path:
        return layout.output_dir(self.datacenter, job.owner.get_username(), job.name, job.uid)

    def worker_dir(self, job: Job, role: str, index: int) -> Path:
        return self.output(job) / worker_folder(role, index)

    def state_dir(self, job: Job, role: str, index: int) -> Path:
        """The supervisor's files (exit status, launcher stderr): the engine's, out of the job's reach."""
        return Path(settings.VAR_DIR) / "local-engine" / job.uid / worker_folder(role, index)

    def status_path(self, job: Job, role: str, index: int) -> Path:
        return self.state_dir(job, role, index) / "exit_status.json"

    def sandbox_probe(self) -> sandbox.Probe | None:
        """The working sandbox, None where the datacenter runs jobs without one; refuses otherwise."""
        probe = sandbox.probe()
        if probe.ok:
            return probe
        if self.datacenter.run_without_sandbox:
            local_world.warn_once("sandbox", f"local engine: running jobs WITHOUT a sandbox: {probe.error}")
            return None
        raise EngineError(
            f"{probe.error}. Jobs on datacenter {self.datacenter.name!r} run only in the sandbox; "
            "an operator can install bubblewrap, enable unprivileged user namespaces, or tick "
            "'run without sandbox' on the datacenter (trusted users only)."
        )

    def network(self, job: Job, recorder: Recorder) -> tuple[str, ...]:
        """The prefix that puts a process into the job's own network (network.py), started with the
        job's first process and recorded like a worker, so stop() ends it with the job."""
        record = job.engine_data.get("network")
        state = Path(settings.VAR_DIR) / "local-engine" / job.uid
        if record is None:
            ids = local_world.job_ids(job.owner_id)
            try:
                held = network.start(state, *ids, egress=local_world.egress(self.datacenter))
            except (network.NetworkUnavailable, OSError) as exc:
                raise EngineError(str(exc)) from None
            record = {
                **held.spawned.record(),
                "netns_pid": held.netns_pid,
                "netns_start": held.netns_start,
                "egress": held.egress,
            }
            recorder.keep(job, {"network": record})
        # Checked just before use: a pid reused by another job's holder would be another job's network.
        if not processes.is_alive(record["netns_pid"], record["netns_start"]):
            raise EngineError(f"{network.ended(state)}; its processes cannot join it")
        return tuple(network.enter_argv(network.tools(egress=False)["nsenter"], record["netns_pid"]))

    def ports(self, job: Job, recorder: Recorder) -> dict[str, Any]:
        """Ports are chosen once and kept on the job, so a retried start reuses them."""
        if "ports" not in job.engine_data:
            free = free_ports(job.pservers + job.trainers + 2)
            ports = {
                "pservers": free[: job.pservers],
                "trainers": free[job.pservers : job.pservers + job.trainers],
                "gloo": free[-2],
                "master": free[-1],
            }
            recorder.keep(job, {"ports": ports})
        return dict(job.engine_data["ports"])

    def env(
        self,
        job: Job,
        role: Role,
        index: int,
        package: str,
        output: str,
        runtime: runtimes.RuntimePaths | None,
        recorder: Recorder,
    ) -> dict[str, str]:
        """The job's environment; `runtime` is given when the process runs in the sandbox."""
        ports = self.ports(job, recorder)
        spec = job.spec
        if runtime is not None:
            env = self._sandbox_env(job, runtime)
        else:
            env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
            env.update(spec.get("env") or {})
        loopback = HOST
        username = job.owner.get_username()
        # PADDLECLOUD_HOME: the owner's home where the process sees it (the sandbox binds it at /pfs/...).
        if runtime is None:
            home = str(layout.home_dir(self.datacenter, username))
        else:
            home = paths.places(self.datacenter, username).home_inside
        peers = Peers(
            pserver_hosts=(loopback,) * job.pservers,
            pserver_ports=tuple(ports["pservers"]),
            trainer_hosts=(loopback,) * job.trainers,
            trainer_ports=tuple(ports["trainers"]),
            gloo_port=ports["gloo"],
            master_port=ports["master"],
            pod_ip=loopback,
        )
        # The supervisor writes log.txt from the launcher's stdout, outside the sandbox (joblog).
        launch = Launch.of(job, self.datacenter.name, package, home, output, log_limit(self.datacenter), "engine")
        env.update(launch.env(role.value, peers, index))
        if role == Role.TRAINER:
            env.update(gpus.gpu_env(job, index))
        return env

    def spawn(self, job: Job, worker: Worker, package: Path, recorder: Recorder) -> None:
        """Start one worker's process; `worker` (a row, not saved here) then shows it running. A folder the job
        itself broke (its worker folder swapped for a link, a file where a folder goes) fails this job's start as
        an EngineError, never the loop that follows every job."""
        try:
            self._spawn(job, worker, package, recorder)
        except OSError as exc:
            raise EngineError(f"cannot start {worker.name}: {exc.strerror or exc}") from exc

    def _spawn(self, job: Job, worker: Worker, package: Path, recorder: Recorder) -> None:
        directory = self.worker_dir(job, worker.role, worker.index)
        state = self.state_dir(job, worker.role, worker.index)
        state.mkdir(parents=True, exist_ok=True)
        probe = self.sandbox_probe()
        try:
            runtime = runtimes.runtime_for(job, package)
        except runtimes.RuntimeUnavailable as exc:
            raise EngineError(str(exc)) from None
        if probe is not None and runtime.building is not None:
            # Its layer was built before the job's first process (start_layer_build) and is gone since (tidied as
            # the user's older layers are): a job process never installs what it runs in.
            raise EngineError(f"its requirements layer {Path(runtime.building).name} is gone; submit the job again")
        argv = [runtime.python, "-m", "paddlecloud.runtime.launcher"]
        role = Role(worker.role)
        where = paths.places(self.datacenter, job.owner.get_username())
        ids = local_world.job_ids(job.owner_id) if probe is not None else None
        if ids is None:
            directory.mkdir(parents=True, exist_ok=True)
        else:
            writes = paths.job_dirs(where, package, directory)
            paths.prepare_dirs(self.datacenter, where, writes, runs_as_root=os.geteuid() == 0, owner=ids)
        held = joblog.hold(job, worker.name, log_limit(self.datacenter))
        try:
            if probe is None or ids is None:
                env = self.env(job, role, worker.index, str(package), str(self.output(job)), None, recorder)
            else:
                inside = where.inside(package)
                env = self.env(job, role, worker.index, inside, where.inside(self.output(job)), runtime, recorder)
                devices = gpus.gpu_devices(job, worker.index) if role == Role.TRAINER else []
                enter = self.network(job, recorder)
                egress = bool(job.engine_data["network"]["egress"])
                sealed = held.sealed(where.inside(directory))
                world = local_world.build(
                    self.datacenter, where, inside, probe, runtime, devices, ids, enter, egress, sealed
                )
                argv = sandbox.command(world, argv)
            spawned = self._supervised(job, worker, argv, env, runtime, package, state, held, probe is not None)
        finally:
            held.close()
        worker.pid = spawned.pid
        worker.state = WorkerState.RUNNING
        worker.started_at = timezone.now()
        worker.exit_code = None
        worker.host = HOST
        # Recorded at once, process by process (a worker that dies mid-start leaves no stranger), and
        # key by key: a kill recording its stop at the same moment keeps this record, and this keeps its.
        recorder.keep(job, {worker.name: spawned.record()})
        recorder.started(job, status_of(worker))

    def layer_build_dir(self, job: Job) -> Path:
        """The build step's state (its exit status, stderr): the engine's, out of the job's reach."""
        return Path(settings.VAR_DIR) / "local-engine" / job.uid / LAYER_BUILD

    def start_layer_build(self, job: Job, package: Path, recorder: Recorder) -> bool:
        """Start the build step of the job's requirements layer when its processes need one not built yet: True
        while it runs (or just started), when no process of the job may start; False once the layer is ready (or
        none is needed, or the job runs without a sandbox, where the launcher installs it as before).

        The step (paddlecloud.runtime.layer) runs in a sandbox of its own (world.layer_build) as the job's uid,
        in the job's network, within the trainer's limits, writing only that layer; its output goes to trainer
        0's log, ahead of that trainer's first attempt. The engine follows it like a worker (``engine_data``'s
        LAYER_BUILD record: stop() ends it with the job) and the supervisor announces its exit at once."""
        probe = self.sandbox_probe()
        try:
            runtime = runtimes.runtime_for(job, package)
        except runtimes.RuntimeUnavailable as exc:
            raise EngineError(str(exc)) from None
        if probe is None or runtime.building is None:
            return False
        key = Path(runtime.building).name
        record = job.engine_data.get(LAYER_BUILD)
        if record is not None:
            if record.get("key") != key:
                raise EngineError("its requirements.txt changed while its layer was installed; submit the job again")
            if processes.exit_status(self.layer_build_dir(job) / "exit_status.json") == 0:
                raise EngineError(f"its requirements layer {key} was removed as soon as it was installed")
            return True  # running, or its failure is the judge's to report (layer_build_fate)
        try:
            self._start_layer_build(job, package, recorder, probe, runtime)
        except OSError as exc:  # e.g. a folder of its own the job's owner broke: this job's failure, no one else's
            raise EngineError(f"cannot start the build of its requirements layer: {exc.strerror or exc}") from exc
        return True

    def _start_layer_build(
        self, job: Job, package: Path, recorder: Recorder, probe: sandbox.Probe, runtime: runtimes.RuntimePaths
    ) -> None:
        assert runtime.building is not None
        key = Path(runtime.building).name
        state = self.layer_build_dir(job)
        state.mkdir(parents=True, exist_ok=True)
        where = paths.places(self.datacenter, job.owner.get_username())
        ids = local_world.job_ids(job.owner_id)
        directory = self.worker_dir(job, Role.TRAINER, 0)
        paths.prepare_dirs(
            self.datacenter, where, paths.job_dirs(where, package, directory), runs_as_root=os.geteuid() == 0, owner=ids
        )
        inside = where.inside(package)
        enter = self.network(job, recorder)
        world = local_world.layer_build(
            self.datacenter, where, inside, probe, runtime, ids, enter, bool(job.engine_data["network"]["egress"])
        )
        cache = runtime.env[env_name("venv_cache")]
        argv = sandbox.command(world, [runtime.python, "-m", "paddlecloud.runtime.layer", f"{inside}/{REQS}", cache])
        env = self._sandbox_env(job, runtime) | runtime.env
        group = local_world.cgroup(
            local_world.group_name(job.uid, LAYER_BUILD, 0),
            local_world.limits(job.spec, Role.TRAINER, self.datacenter.job_pids_limit),
            local_world.user_group(job.owner_id, self.datacenter.user_pids_limit),
        )
        held = joblog.hold(job, worker_name(Role.TRAINER, 0), log_limit(self.datacenter))
        try:
            spawned = processes.spawn(
                argv,
                env=env,
                cwd=package,
                status_path=state / "exit_status.json",
                stderr_path=state / "launcher.err",
                cgroup=group,
                job_id=job.pk,
                nproc=self.datacenter.user_pids_limit if os.geteuid() == 0 else None,
                log=held.log,
            )
        finally:
            held.close()
        recorder.keep(job, {LAYER_BUILD: {"key": key, **spawned.record()}})

    def layer_build_fate(self, job: Job) -> tuple[bool, int | None] | None:
        """(still running, exit code once it ended) of the job's build step; None where it has none."""
        record = job.engine_data.get(LAYER_BUILD)
        if not isinstance(record, dict):
            return None
        return _fate(record, self.layer_build_dir(job) / "exit_status.json")

    def _sandbox_env(self, job: Job, runtime: runtimes.RuntimePaths) -> dict[str, str]:
        """A sandboxed process's environment but the launcher's facts: what passes through from the worker (never
        its own folders: a private /tmp is home) and the job's own variables."""
        env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
        for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "PIP_CACHE_DIR"):
            env.pop(name, None)
        tmp = sandbox.PRIVATE_TMP
        env.update({"HOME": tmp, "TMPDIR": tmp, "PATH": local_world.job_path(runtime)})
        env.update(job.spec.get("env") or {})
        return env

    def _supervised(
        self,
        job: Job,
        worker: Worker,
        argv: list[str],
        env: dict[str, str],
        runtime: runtimes.RuntimePaths,
        package: Path,
        state: Path,
        held: joblog.HeldLog,
        sandboxed: bool,
    ) -> processes.Spawned:
        """``argv`` started under its supervisor, in the worker's cgroup, writing the worker's log (a sandbox's
        command gets the read-only descriptors it binds)."""
        env.update(runtime.env)
        group = local_world.cgroup(
            local_world.group_name(job.uid, worker.name, worker.restarts),
            local_world.limits(job.spec, worker.role, self.datacenter.job_pids_limit),
            local_world.user_group(job.owner_id, self.datacenter.user_pids_limit),
        )
        return processes.spawn(
            argv,
            env=env,
            cwd=package,
            status_path=self.status_path(job, worker.role, worker.index),
            stderr_path=state / "launcher.err",
            cgroup=group,
            job_id=job.pk,
            # The owner's job uid (a root worker's sandbox drops to it): all of the user's job processes on
            # this host, bounded even without a pids controller; unprivileged, the host sees the worker's uid.
            nproc=self.datacenter.user_pids_limit if os.geteuid() == 0 and sandboxed else None,
            log=held.log,
            inherit=held.readonly if sandboxed else (),
        )

    def restart(self, job: Job, worker: Worker, code: int | None, package: Path, recorder: Recorder) -> None:
        """Start a failed trainer again; its row counts the attempt and says why."""
        worker.restarts += 1  # before the spawn: its cgroup's name holds the attempt
        worker.message = f"restarted after it {processes.describe_exit(code)}"
        try:
            self.spawn(job, worker, package, recorder)
        except EngineError:
            worker.restarts -= 1  # not restarted: the job's message must not count it
            raise

    def fate(self, job: Job, worker: Worker) -> tuple[bool, int | None]:
        """(still running, exit code once it ended)."""
        record = job.engine_data.get(worker.name)
        if not record:
            return False, None
        return _fate(record, self.status_path(job, worker.role, worker.index))

    def groups(self, job: Job, network: bool = True) -> list[tuple[int, int, int, int]]:
        """(pid, start, supervisor, start) of every process group the job has: its workers, and its network's."""
        return [
            (r["pid"], r["pid_start"], r["supervisor"], r["supervisor_start"])
            for key, r in job.engine_data.items()
            if isinstance(r, dict) and "supervisor" in r and (network or key != "network")
        ]

    def end_network_once_alone(self, job: Job) -> None:
        """The job's network serves only its processes: once none is left it ends at once, without the
        grace, so a finished job is released in the same cycle (its pservers shown as they ended)."""
        network_record = job.engine_data.get("network")
        if not isinstance(network_record, dict) or any(
            processes.is_alive(g[0], g[1]) or processes.is_alive(g[2], g[3]) for g in self.groups(job, network=False)
        ):
            return
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and (
            processes.is_alive(network_record["pid"], network_record["pid_start"])
            or processes.is_alive(network_record["supervisor"], network_record["supervisor_start"])
        ):
            if processes.is_alive(network_record["pid"], network_record["pid_start"]):
                processes.signal_groups([network_record["pid"]], signal.SIGKILL)  # its namespace and slirp4netns too
            time.sleep(0.05)

    def stop(self, job: Job, recorder: Recorder, grace: float | None = None) -> bool:
        """SIGTERM every process group once (and its launcher again until it goes); SIGKILL a group its grace
        period after its own SIGTERM.

        Per group, not once for the job: a worker whose record or launcher appeared after the first call (a job
        killed a moment after it started) still gets its SIGTERM and its whole grace, instead of nothing and then
        SIGKILL. One SIGTERM per group: a second could hit a process mid-exit and change its exit code."""
        self.end_network_once_alone(job)
        alive = [g for g in self.groups(job) if processes.is_alive(g[0], g[1]) or processes.is_alive(g[2], g[3])]
        if not alive:
            gpus.release(job)  # only now: a GPU is free once no process of the job can use it
            return True
        now = time.time()
        first = float(job.engine_data.get("stop_requested_at") or now)
        sent: dict[str, float] = dict(job.engine_data.get("stop_sent") or {})  # launcher pid -> its SIGTERM's time
        if grace is None:
            grace = settings.PADDLECLOUD_KILL_GRACE_SECONDS
        newly = {}
        for pid, pid_start, supervisor, _ in alive:
            since = sent.get(str(pid))
            if processes.is_alive(pid, pid_start):
                # The launcher's group only: its supervisor must live on to record how it ended (143, 137).
                if since is None and grace > 0:
                    processes.signal_groups([pid], signal.SIGTERM)
                    newly[str(pid)] = now
                elif since is None or now - since >= grace:
                    processes.signal_groups([pid], signal.SIGKILL)
                else:
                    # Again, to the launcher alone: it is its sandbox's pid 1, and the kernel drops a signal to a
                    # namespace's init that has no handler yet (a launcher still starting), so the first copy may
                    # be lost. Its handler relays a SIGTERM to the group once and ignores the repeats.
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGTERM)
            elif now - (since or first) >= 2 * grace + 5:
                processes.signal_groups([supervisor], signal.SIGKILL)  # stuck writing the status: give up on it
        if newly or "stop_requested_at" not in job.engine_data:
            recorder.keep(job, {"stop_requested_at": first, "stop_sent": {**sent, **newly}})
        return False

    def stop_pservers(self, job: Job, recorder: Recorder) -> bool:
        """Every trainer exited 0: stop the pservers (they never exit by themselves) and say so in their logs.

        SIGKILL, not SIGTERM: Paddle answers SIGTERM with a C++ "FatalError: Termination signal" traceback
        that reads like a crash; a killed pserver prints nothing and our line is the last one of its log.
        """
        pservers = [w for w in Worker.objects.filter(job=job, role=Role.PSERVER) if w.name in job.engine_data]
        if not pservers or job.engine_data.get("pservers_stop_logged"):
            return True
        trainers = [w for w in Worker.objects.filter(job=job, role=Role.TRAINER) if w.name in job.engine_data]
        if len(trainers) < job.trainers or any(self.fate(job, w) != (False, 0) for w in trainers):
            return True  # not a success: release() stops everything the usual way
        if not job.engine_data.get("pservers_stopped"):
            recorder.keep(job, {"pservers_stopped": time.time()})
        deadline = time.monotonic() + 3
        while True:
            alive = [w for w in pservers if self.fate(job, w)[0]]
            for w in alive:
                # The launcher's own group only: the supervisor lives on to record the exit status.
                processes.signal_groups([job.engine_data[w.name]["pid"]], signal.SIGKILL)
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if alive:
            return False  # the next cycle checks again
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for w in pservers:
            try:
                with os.fdopen(open_log_fd(job, w.name, os.O_WRONLY | os.O_APPEND), "a") as log:
                    log.write(f"[paddlecloud] {when} pserver {w.index} {STOPPED_AFTER_SUCCESS}\n")
            except OSError:
                pass  # storage gone: the worker's message still says it
        recorder.keep(job, {"pservers_stop_logged": True})
        return True
