"""The `local` engine: every pserver and trainer is a process on the worker's host, in the job's own network.

It is its own controller: `poll` restarts failed trainers up to max_retries, and reports a job failed
as soon as a pserver dies (trainers would otherwise exit 0 with nothing learned). Every process runs
in a bubblewrap sandbox as an unprivileged user, seeing only its user's /pfs paths (world.py, storage/paths.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from paddlecloud.contract.jobenv import JobEnv
from paddlecloud.contract.layout import worker_folder
from paddlecloud.contract.units import free_ports

from jobs import errorline, layout, runtimes
from jobs.engines.base import Engine, EngineError, LogChunk, Observation, WorkerStatus
from jobs.engines.local import gpus, network, processes, sandbox
from jobs.engines.local import world as local_world
from jobs.logfiles import log_limit, log_tail, open_log_fd, parse_cursor, read_log_file
from jobs.models import STARTED_STATES, TERMINAL_STATES, Job, JobState, Reason, Role, Worker, WorkerState
from jobs.states import merge_engine_data
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
# The launcher's own failures (paddlecloud.runtime.launcher): their reason is its last `error:` log line.
_LAUNCHER_CODES = (64, 68, 69, 70, 71)


def _plan(job: Job) -> list[tuple[Role, int]]:
    return [(Role.PSERVER, i) for i in range(job.pservers)] + [(Role.TRAINER, i) for i in range(job.trainers)]


def _still_wanted(job: Job) -> bool:
    """The job is not final, as the database says now (a kill may have come after this copy was read)."""
    if job.state in TERMINAL_STATES:
        return False
    return Job.objects.filter(pk=job.pk).exclude(state__in=TERMINAL_STATES).exists()


@dataclass
class _Tally:
    """What one look at a job's workers found: whether all run, the first lost pserver and failed trainer."""

    all_running: bool = True
    trainers_done: int = 0
    pserver_lost: tuple[int, int | None] | None = None  # (index, exit code)
    trainer_failed: tuple[int, int | None, int, str] | None = None  # (index, exit code, restarts, message)


def _message_of(statuses: list[WorkerStatus], role: Role, index: int) -> str:
    return next((s.message for s in statuses if (s.role, s.index) == (role, index)), "")


def _set_message(statuses: list[WorkerStatus], role: Role, index: int, message: str) -> None:
    for status in statuses:
        if (status.role, status.index) == (role, index):
            status.message = message


def _after(why: str, ended: str) -> str:
    """`why` (a worker's message) as the tail of a job message that already says `ended`: ": <reason>"."""
    if why.startswith(ended):
        return why[len(ended) :]
    return f": {why}" if why else ""


class LocalEngine(Engine):
    def _output(self, job: Job) -> Path:
        return layout.output_dir(self.datacenter, job.owner.get_username(), job.name, job.uid)

    def _worker_dir(self, job: Job, role: str, index: int) -> Path:
        return self._output(job) / worker_folder(role, index)

    def _state_dir(self, job: Job, role: str, index: int) -> Path:
        """The supervisor's files (exit status, launcher stderr): the engine's, out of the job's reach."""
        return Path(settings.VAR_DIR) / "local-engine" / job.uid / worker_folder(role, index)

    def _status_path(self, job: Job, role: str, index: int) -> Path:
        return self._state_dir(job, role, index) / "exit_status.json"

    def _sandbox_probe(self) -> sandbox.Probe | None:
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

    def _network(self, job: Job) -> tuple[str, ...]:
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
                "pid": held.spawned.pid,
                "pid_start": held.spawned.pid_start,
                "supervisor": held.spawned.supervisor,
                "supervisor_start": held.spawned.supervisor_start,
                "netns_pid": held.netns_pid,
                "netns_start": held.netns_start,
                "egress": held.egress,
            }
            job.engine_data = merge_engine_data(job.pk, {"network": record})
        # Checked just before use: a pid reused by another job's holder would be another job's network.
        if not processes.is_alive(record["netns_pid"], record["netns_start"]):
            raise EngineError(f"{network.ended(state)}; its processes cannot join it")
        return tuple(network.enter_argv(network.tools(egress=False)["nsenter"], record["netns_pid"]))

    def _ports(self, job: Job) -> dict[str, Any]:
        """Ports are chosen once and kept on the job, so a retried start reuses them."""
        if "ports" not in job.engine_data:
            free = free_ports(job.pservers + job.trainers + 2)
            ports = {
                "pservers": free[: job.pservers],
                "trainers": free[job.pservers : job.pservers + job.trainers],
                "gloo": free[-2],
                "master": free[-1],
            }
            job.engine_data = merge_engine_data(job.pk, {"ports": ports})
        return dict(job.engine_data["ports"])

    def _env(
        self, job: Job, role: Role, index: int, package: str, output: str, runtime: runtimes.RuntimePaths | None
    ) -> dict[str, str]:
        """The job's environment; `runtime` is given when the process runs in the sandbox."""
        ports = self._ports(job)
        spec = job.spec
        env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
        if runtime is not None:
            # The worker's own directories do not exist in the sandbox: a private /tmp is home.
            for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "PIP_CACHE_DIR"):
                env.pop(name, None)
            tmp = sandbox.PRIVATE_TMP
            env.update({"HOME": tmp, "TMPDIR": tmp, "PATH": local_world.job_path(runtime)})
        env.update(spec.get("env") or {})
        loopback = "127.0.0.1"
        username = job.owner.get_username()
        # PADDLECLOUD_HOME: the owner's home where the process sees it (the sandbox binds it at /pfs/...).
        if runtime is None:
            home = str(layout.home_dir(self.datacenter, username))
        else:
            home = paths.places(self.datacenter, username).home_inside
        env.update(
            JobEnv(
                role=role.value,
                index=index,
                trainers=job.trainers,
                pservers=job.pservers,
                pserver_hosts=(loopback,) * job.pservers,
                pserver_ports=tuple(ports["pservers"]),
                trainer_hosts=(loopback,) * job.trainers,
                trainer_ports=tuple(ports["trainers"]),
                gloo_port=ports["gloo"],
                master_port=ports["master"],
                pod_ip=loopback,
                job_name=job.name,
                datacenter=self.datacenter.name,
                username=username,
                package_dir=package,
                home=home,
                entry=spec["entry"],
                output_dir=output,
                passes=spec.get("passes", 1),
                log_limit=log_limit(self.datacenter),
            ).to_env()
        )
        if role == Role.TRAINER:
            env.update(gpus.gpu_env(job, index))
        return env

    def _spawn(self, job: Job, worker: Worker, package: Path) -> None:
        directory = self._worker_dir(job, worker.role, worker.index)
        state = self._state_dir(job, worker.role, worker.index)
        state.mkdir(parents=True, exist_ok=True)
        probe = self._sandbox_probe()
        try:
            runtime = runtimes.runtime_for(job, package)
        except runtimes.RuntimeUnavailable as exc:
            raise EngineError(str(exc)) from None
        argv = [runtime.python, "-m", "paddlecloud.runtime.launcher"]
        role = Role(worker.role)
        if probe is None:
            directory.mkdir(parents=True, exist_ok=True)
            env = self._env(job, role, worker.index, str(package), str(self._output(job)), runtime=None)
        else:
            ids = local_world.job_ids(job.owner_id)
            where = paths.places(self.datacenter, job.owner.get_username())
            paths.prepare_dirs(self.datacenter, where, [directory], runs_as_root=os.geteuid() == 0, owner=ids)
            inside = where.inside(package)
            env = self._env(job, role, worker.index, inside, where.inside(self._output(job)), runtime=runtime)
            devices = gpus.gpu_devices(job, worker.index) if role == Role.TRAINER else []
            enter = self._network(job)
            egress = bool(job.engine_data["network"]["egress"])
            world = local_world.build(self.datacenter, where, inside, probe, runtime, devices, ids, enter, egress)
            argv = sandbox.command(world, argv)
        env.update(runtime.env)
        group = local_world.cgroup(
            f"{job.uid}-{worker.name}-{worker.restarts}",
            local_world.limits(job.spec, worker.role, self.datacenter.job_pids_limit),
        )
        spawned = processes.spawn(
            argv,
            env=env,
            cwd=package,
            status_path=self._status_path(job, worker.role, worker.index),
            stderr_path=state / "launcher.err",
            cgroup=group,
        )
        worker.pid = spawned.pid
        worker.state = WorkerState.RUNNING
        worker.started_at = timezone.now()
        worker.exit_code = None
        worker.host = "127.0.0.1"
        # Recorded at once, process by process (a worker that dies mid-start leaves no stranger), and
        # key by key: a kill recording its stop at the same moment keeps this record, and this keeps its.
        record = {
            "pid": spawned.pid,
            "pid_start": spawned.pid_start,
            "supervisor": spawned.supervisor,
            "supervisor_start": spawned.supervisor_start,
        }
        job.engine_data = merge_engine_data(job.pk, {worker.name: record})
        worker.save()

    def start(self, job: Job) -> None:
        package = self.package(job)
        self._sandbox_probe()  # no sandbox, no job: refused before anything starts
        if not gpus.acquire(job):
            return  # waits, pending; the reconciler starts it once its GPUs are free (see _observe)
        self._ports(job)
        for role, index in _plan(job):
            if not _still_wanted(job):
                return  # killed (or failed) while starting: nothing more starts; its release stops the rest
            worker, _ = Worker.objects.get_or_create(job=job, role=role, index=index)
            if f"{worker.name}" not in job.engine_data:
                self._spawn(job, worker, package)

    def _fate(self, job: Job, worker: Worker) -> tuple[bool, int | None]:
        """(still running, exit code once it ended)."""
        record = job.engine_data.get(worker.name)
        if not record:
            return False, None
        if processes.is_alive(record["pid"], record["pid_start"]):
            return True, None
        code = processes.exit_status(self._status_path(job, worker.role, worker.index))
        if code is None and processes.is_alive(record["supervisor"], record["supervisor_start"]):
            return True, None  # the launcher just ended; its supervisor is writing the status
        return False, code

    def poll(self, jobs: list[Job]) -> dict[int, Observation]:
        return {job.pk: self._observe(job) for job in jobs}

    def _waiting_for_gpus(self, job: Job) -> Observation | None:
        """Start a job that waited for GPUs once they are free; the pending observation while it waits."""
        if job.state not in STARTED_STATES or not gpus.needed(job) or gpus.assigned(job):
            return None
        if gpus.acquire(job):
            try:
                self.start(job)
            except EngineError as exc:
                return Observation(JobState.FAILED, Reason.SUBMIT_FAILED, str(exc))
            return None
        free = gpus.free_count(self.datacenter)
        count = gpus.needed(job)
        message = f"waiting for {count} GPU{'s' if count > 1 else ''} ({free} of {len(self.datacenter.gpus)} free)"
        return Observation(JobState.PENDING, Reason.UNSCHEDULABLE, message)

    def _open_log(self, job: Job, worker: Worker, flags: int) -> int:
        """A worker's log.txt opened by the worker: it lies in the user's home, where a job could plant or
        swap in a link to a file of the portal, so it is opened from the home's descriptor with no link
        followed at any step, and only if it is a regular file (jobs.logfiles.open_log_fd)."""
        return open_log_fd(job, worker.name, flags)

    def _log_reason(self, job: Job, worker: Worker) -> str:
        """What the worker's log's end says of its failure (jobs.errorline.worker_reason); "" without a log."""
        return errorline.worker_reason(log_tail(job, worker.name), worker.role)

    def _ended(self, job: Job, worker: Worker, code: int | None) -> tuple[WorkerState, str]:
        """State and message of a worker whose process ended (before restarts are considered).

        A pserver never ends by itself while the job runs: one that did, even with code 0, is lost
        (unless the engine stopped it after every trainer succeeded).
        """
        name = f"{worker.role} {worker.index}"
        if worker.role == Role.PSERVER and job.engine_data.get("pservers_stopped"):
            return WorkerState.SUCCEEDED, STOPPED_AFTER_SUCCESS
        if code == 0 and worker.role == Role.TRAINER:
            return WorkerState.SUCCEEDED, f"{name} exited with code 0"
        if code is not None and code > 128 and "stop_requested_at" in job.engine_data:
            # We stopped it (the job was killed or failed): killed, with the signal and its exit code.
            return WorkerState.KILLED, f"{name} {processes.describe_exit(code)}"
        why = self._log_reason(job, worker)
        if code in _LAUNCHER_CODES and why:
            return WorkerState.FAILED, why  # the launcher's own failure: its words say it all
        ended = f"{name} {processes.describe_exit(code)}"
        return WorkerState.FAILED, f"{ended}: {why}" if why else ended

    def _observe(self, job: Job) -> Observation:
        waiting = self._waiting_for_gpus(job)
        if waiting is not None:
            return waiting
        workers = {(w.role, w.index): w for w in Worker.objects.filter(job=job)}
        statuses: list[WorkerStatus] = []
        tally = _Tally()
        max_retries = int(job.spec.get("max_retries", 0))
        for role, index in _plan(job):
            worker = workers.get((role, index))
            if worker is None or worker.name not in job.engine_data:
                tally.all_running = False
                continue
            statuses.append(self._worker_status(job, role, index, worker, tally, max_retries))
        return self._verdict(job, tally, statuses, max_retries)

    def _worker_status(
        self, job: Job, role: Role, index: int, worker: Worker, tally: _Tally, max_retries: int
    ) -> WorkerStatus:
        """One started worker's status; a trainer that failed with retries left is restarted here."""
        running, code = self._fate(job, worker)
        state, message = WorkerState.RUNNING, ""
        if not running:
            state, message = self._ended(job, worker, code)
            if role == Role.PSERVER and state != WorkerState.SUCCEEDED:
                tally.pserver_lost = tally.pserver_lost or (index, code)
            elif role == Role.TRAINER and state == WorkerState.SUCCEEDED:
                tally.trainers_done += 1
            elif role == Role.TRAINER and worker.restarts < max_retries and _still_wanted(job):
                try:
                    self._restart(job, worker, code)
                    state, message = WorkerState.RUNNING, f"restarted after it {processes.describe_exit(code)}"
                    code = None
                except EngineError as exc:  # e.g. its runtime was removed: fail this job, not the loop
                    message = f"{message}; cannot restart it: {exc}"
                    tally.trainer_failed = tally.trainer_failed or (index, code, worker.restarts, message)
            elif role == Role.TRAINER:
                tally.trainer_failed = tally.trainer_failed or (index, code, worker.restarts, message)
        return WorkerStatus(
            role=role,
            index=index,
            state=state,
            host="127.0.0.1",
            pid=job.engine_data[worker.name]["pid"],
            started_at=worker.started_at,
            restarts=worker.restarts,
            exit_code=code,
            message=message,
        )

    def _verdict(self, job: Job, tally: _Tally, statuses: list[WorkerStatus], max_retries: int) -> Observation:
        """The job's state from what its workers did: a lost pserver or a failed trainer (OOM first) fails it,
        its message naming the worker's exit and its last error line; once every trainer succeeded, a
        pserver that ended is no loss."""
        if tally.trainers_done == job.trainers and tally.trainer_failed is None:
            return Observation(JobState.SUCCEEDED, workers=statuses, exit_code=0)
        pserver_lost, trainer_failed = tally.pserver_lost, tally.trainer_failed
        culprits = ([(Role.PSERVER, *pserver_lost)] if pserver_lost else []) + (
            [(Role.TRAINER, *trainer_failed[:2])] if trainer_failed else []
        )
        limited = self._over_a_limit(job, culprits, statuses)
        if limited is not None:
            return limited
        if pserver_lost is not None:
            index, code = pserver_lost
            ended = f"pserver {index} {processes.describe_exit(code)}"
            why = _after(_message_of(statuses, Role.PSERVER, index), ended)
            message = f"{ended}{why}; the job cannot go on without it"
            return Observation(JobState.FAILED, Reason.PSERVER_LOST, message, code, statuses)
        if trainer_failed is not None:
            index, code, restarts, why = trainer_failed
            reason = Reason.BACKOFF_LIMIT if max_retries else Reason.TRAINER_FAILED
            retries = f" after {restarts} restart(s)" if max_retries else ""
            ended = f"trainer {index} {processes.describe_exit(code)}"
            message = f"{ended}{retries}{_after(why, ended)}"
            return Observation(JobState.FAILED, reason, message, code, statuses)
        return Observation(JobState.RUNNING if tally.all_running else JobState.PENDING, workers=statuses)

    def _over_a_limit(
        self, job: Job, culprits: list[tuple[Role, int, int | None]], statuses: list[WorkerStatus]
    ) -> Observation | None:
        """The failure of a worker the kernel stopped at a limit (memory first, then processes), or None;
        the worker's row says it too."""
        for role, index, code in culprits:
            if processes.oom_killed(self._status_path(job, role, index)):
                limit = job.spec.get("psmemory" if role == Role.PSERVER else "memory")
                message = f"{role} {index} went over its memory limit ({limit}) and was killed"
                _set_message(statuses, role, index, message)
                return Observation(JobState.FAILED, Reason.OOM_KILLED, message, code, statuses)
        for role, index, code in culprits:
            if refused := processes.forks_refused(self._status_path(job, role, index)):
                limit = self.datacenter.job_pids_limit
                message = (
                    f"{role} {index} {processes.describe_exit(code)} after {refused} fork(s) were refused at "
                    f"the datacenter's limit of {limit} processes per worker"
                )
                _set_message(statuses, role, index, message)
                return Observation(JobState.FAILED, Reason.PIDS_LIMIT, message, code, statuses)
        return None

    def final_workers(self, job: Job) -> list[WorkerStatus]:
        return self._observe(job).workers

    def finish(self, job: Job) -> bool:
        """Every trainer exited 0: stop the pservers (they never exit by themselves) and say so in their logs.

        SIGKILL, not SIGTERM: Paddle answers SIGTERM with a C++ "FatalError: Termination signal" traceback
        that reads like a crash; a killed pserver prints nothing and our line is the last one of its log.
        """
        pservers = [w for w in Worker.objects.filter(job=job, role=Role.PSERVER) if w.name in job.engine_data]
        if not pservers or job.engine_data.get("pservers_stop_logged"):
            return True
        trainers = [w for w in Worker.objects.filter(job=job, role=Role.TRAINER) if w.name in job.engine_data]
        if len(trainers) < job.trainers or any(self._fate(job, w) != (False, 0) for w in trainers):
            return True  # not a success: release() stops everything the usual way
        if not job.engine_data.get("pservers_stopped"):
            job.engine_data = merge_engine_data(job.pk, {"pservers_stopped": time.time()})
        deadline = time.monotonic() + 3
        while True:
            alive = [w for w in pservers if self._fate(job, w)[0]]
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
                with os.fdopen(self._open_log(job, w, os.O_WRONLY | os.O_APPEND), "a") as log:
                    log.write(f"[paddlecloud] {when} pserver {w.index} {STOPPED_AFTER_SUCCESS}\n")
            except OSError:
                pass  # storage gone: the worker's message still says it
        job.engine_data = merge_engine_data(job.pk, {"pservers_stop_logged": True})
        return True

    def _restart(self, job: Job, worker: Worker, code: int | None) -> None:
        worker.restarts += 1  # before the spawn: its cgroup's name holds the attempt
        worker.message = f"restarted after it {processes.describe_exit(code)}"
        try:
            self._spawn(job, worker, self.package(job))
        except EngineError:
            worker.restarts -= 1  # not restarted: the job's message must not count it
            raise

    def _groups(self, job: Job, network: bool = True) -> list[tuple[int, int, int, int]]:
        """(pid, start, supervisor, start) of every process group the job has: its workers, and its network's."""
        return [
            (r["pid"], r["pid_start"], r["supervisor"], r["supervisor_start"])
            for key, r in job.engine_data.items()
            if isinstance(r, dict) and "supervisor" in r and (network or key != "network")
        ]

    def _end_network_once_alone(self, job: Job) -> None:
        """The job's network serves only its processes: once none is left it ends at once, without the
        grace, so a finished job is released in the same cycle (its pservers shown as they ended)."""
        network_record = job.engine_data.get("network")
        if not isinstance(network_record, dict) or any(
            processes.is_alive(g[0], g[1]) or processes.is_alive(g[2], g[3]) for g in self._groups(job, network=False)
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

    def stop(self, job: Job) -> bool:
        """SIGTERM every process group now; SIGKILL what is left once the grace period has passed."""
        self._end_network_once_alone(job)
        alive = [g for g in self._groups(job) if processes.is_alive(g[0], g[1]) or processes.is_alive(g[2], g[3])]
        if not alive:
            gpus.release(job)  # only now: a GPU is free once no process of the job can use it
            return True
        first = job.engine_data.get("stop_requested_at")
        now = time.time()
        if first is None:
            job.engine_data = merge_engine_data(job.pk, {"stop_requested_at": now})
            first = now
        waited = now - float(first)
        grace = settings.PADDLECLOUD_KILL_GRACE_SECONDS
        if 0 < waited < grace:
            return False  # SIGTERM went out once; a second one could hit a process mid-exit and change its code
        sig = signal.SIGKILL if waited >= grace else signal.SIGTERM
        for pid, pid_start, supervisor, _ in alive:
            if processes.is_alive(pid, pid_start):
                # The launcher's group only: its supervisor must live on to record how it ended (143, 137).
                processes.signal_groups([pid], sig)
            elif waited >= 2 * grace + 5:
                processes.signal_groups([supervisor], signal.SIGKILL)  # stuck writing the status: give up on it
        return False

    def read_log(self, job: Job, worker: str, cursor: str) -> LogChunk:
        final = job.state in TERMINAL_STATES and job.released
        chunk = read_log_file(job, worker, cursor, final=final)
        return chunk or LogChunk(text="", cursor=str(parse_cursor(cursor)), complete=final)

    def cleanup(self, job: Job) -> bool:
        # Output and logs stay on the user's storage (they are the user's files); processes go.
        stopped = self.stop(job)
        if stopped:
            shutil.rmtree(Path(settings.VAR_DIR) / "local-engine" / job.uid, ignore_errors=True)
        return stopped
