"""The `local` engine: every pserver and trainer is a process on the worker's host, on 127.0.0.1.

It is its own controller: `poll` restarts failed trainers up to max_retries, and reports a job failed
as soon as a pserver dies (trainers would otherwise exit 0 with nothing learned). Every process runs
in a bubblewrap sandbox as an unprivileged user, seeing only its user's /pfs paths (local_world.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs import packages
from jobs.engines import local_world, processes, sandbox
from jobs.engines.base import Engine, EngineError, LogChunk, Observation, WorkerStatus
from jobs.logfiles import parse_cursor, read_log_file
from jobs.models import TERMINAL_STATES, Job, JobState, Reason, Role, Worker, WorkerState

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


def _plan(job: Job) -> list[tuple[Role, int]]:
    return [(Role.PSERVER, i) for i in range(job.pservers)] + [(Role.TRAINER, i) for i in range(job.trainers)]


class LocalEngine(Engine):
    def _output(self, job: Job) -> Path:
        return packages.output_dir(self.datacenter, job.owner.get_username(), job.name, job.uid)

    def _worker_dir(self, job: Job, role: str, index: int) -> Path:
        return self._output(job) / f"{role}_{index}"

    def _state_dir(self, job: Job, role: str, index: int) -> Path:
        """The supervisor's files (exit status, launcher stderr): the engine's, out of the job's reach."""
        return Path(settings.VAR_DIR) / "local-engine" / job.uid / f"{role}_{index}"

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

    def _ports(self, job: Job) -> dict[str, Any]:
        """Ports are chosen once and kept on the job, so a retried start reuses them."""
        if "ports" not in job.engine_data:
            free = processes.free_ports(job.pservers + job.trainers + 2)
            ports = {
                "pservers": free[: job.pservers],
                "trainers": free[job.pservers : job.pservers + job.trainers],
                "gloo": free[-2],
                "master": free[-1],
            }
            job.engine_data = {**job.engine_data, "ports": ports}
            Job.objects.filter(pk=job.pk).update(engine_data=job.engine_data)
        return dict(job.engine_data["ports"])

    def _env(self, job: Job, role: Role, index: int, package: str, output: str, sandboxed: bool) -> dict[str, str]:
        ports = self._ports(job)
        spec = job.spec
        env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
        if sandboxed:
            # The worker's own directories do not exist in the sandbox: a private /tmp is home.
            for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "PIP_CACHE_DIR"):
                env.pop(name, None)
            tmp = sandbox.PRIVATE_TMP
            env.update({"HOME": tmp, "TMPDIR": tmp, "PATH": local_world.job_path()})
        env.update(spec.get("env") or {})
        env.update(
            {
                "PADDLECLOUD_ROLE": role.value,
                "PADDLECLOUD_INDEX": str(index),
                "PADDLECLOUD_TRAINERS": str(job.trainers),
                "PADDLECLOUD_PSERVERS": str(job.pservers),
                "PADDLECLOUD_PSERVER_HOSTS": ",".join(["127.0.0.1"] * job.pservers),
                "PADDLECLOUD_PSERVER_PORTS": ",".join(map(str, ports["pservers"])),
                "PADDLECLOUD_TRAINER_HOSTS": ",".join(["127.0.0.1"] * job.trainers),
                "PADDLECLOUD_TRAINER_PORTS": ",".join(map(str, ports["trainers"])),
                "PADDLECLOUD_GLOO_PORT": str(ports["gloo"]),
                "PADDLECLOUD_MASTER_PORT": str(ports["master"]),
                "PADDLECLOUD_POD_IP": "127.0.0.1",
                "PADDLECLOUD_JOB_NAME": job.name,
                "PADDLECLOUD_DATACENTER": self.datacenter.name,
                "PADDLECLOUD_USERNAME": job.owner.get_username(),
                "PADDLECLOUD_PACKAGE_DIR": package,
                "PADDLECLOUD_ENTRY": spec["entry"],
                "PADDLECLOUD_OUTPUT_DIR": output,
                "PADDLECLOUD_PASSES": str(spec.get("passes", 1)),
            }
        )
        if sandboxed:
            env["PADDLECLOUD_VENV_CACHE"] = str(local_world.runtime()[1])
        elif settings.PADDLECLOUD_VENV_CACHE:
            env["PADDLECLOUD_VENV_CACHE"] = settings.PADDLECLOUD_VENV_CACHE
        return env

    def _spawn(self, job: Job, worker: Worker, package: Path) -> None:
        directory = self._worker_dir(job, worker.role, worker.index)
        state = self._state_dir(job, worker.role, worker.index)
        state.mkdir(parents=True, exist_ok=True)
        probe = self._sandbox_probe()
        argv = [sys.executable, "-m", "paddlecloud.launcher"]
        role = Role(worker.role)
        if probe is None:
            directory.mkdir(parents=True, exist_ok=True)
            env = self._env(job, role, worker.index, str(package), str(self._output(job)), sandboxed=False)
        else:
            where = local_world.places(self.datacenter, job.owner.get_username())
            local_world.prepare_dirs(self.datacenter, where, [directory], runs_as_root=os.geteuid() == 0)
            inside = where.inside(package)
            env = self._env(job, role, worker.index, inside, where.inside(self._output(job)), sandboxed=True)
            argv = sandbox.command(local_world.build(self.datacenter, where, inside, probe), argv)
        group = local_world.cgroup(
            f"{job.uid}-{worker.name}-{worker.restarts}", local_world.limits(job.spec, worker.role)
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
        # Recorded at once, process by process: a worker that dies mid-start leaves no stranger.
        job.engine_data = {
            **job.engine_data,
            f"{worker.name}": {
                "pid": spawned.pid,
                "pid_start": spawned.pid_start,
                "supervisor": spawned.supervisor,
                "supervisor_start": spawned.supervisor_start,
            },
        }
        Job.objects.filter(pk=job.pk).update(engine_data=job.engine_data)
        worker.save()

    def start(self, job: Job) -> None:
        package = self.package(job)
        self._sandbox_probe()  # no sandbox, no job: refused before anything starts
        self._ports(job)
        for role, index in _plan(job):
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

    def _observe(self, job: Job) -> Observation:
        workers = {(w.role, w.index): w for w in Worker.objects.filter(job=job)}
        statuses: list[WorkerStatus] = []
        pserver_lost: tuple[int, int | None] | None = None
        trainer_failed: tuple[int, int | None, int] | None = None
        trainers_done = 0
        all_running = True
        max_retries = int(job.spec.get("max_retries", 0))
        for role, index in _plan(job):
            worker = workers.get((role, index))
            if worker is None or worker.name not in job.engine_data:
                all_running = False
                continue
            running, code = self._fate(job, worker)
            state, message = WorkerState.RUNNING, ""
            if not running:
                message = f"{role} {index} {processes.describe_exit(code)}"
                if role == Role.PSERVER:
                    state = WorkerState.FAILED
                    pserver_lost = pserver_lost or (index, code)
                elif code == 0:
                    state = WorkerState.SUCCEEDED
                    trainers_done += 1
                elif worker.restarts < max_retries and job.state not in TERMINAL_STATES:
                    self._restart(job, worker, code)
                    state, message = WorkerState.RUNNING, f"restarted after it {processes.describe_exit(code)}"
                else:
                    state = WorkerState.FAILED
                    trainer_failed = trainer_failed or (index, code, worker.restarts)
            statuses.append(
                WorkerStatus(
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
            )
        for role, index, code in ([(Role.PSERVER, *pserver_lost)] if pserver_lost else []) + (
            [(Role.TRAINER, *trainer_failed[:2])] if trainer_failed else []
        ):
            if processes.oom_killed(self._status_path(job, role, index)):
                limit = job.spec.get("psmemory" if role == Role.PSERVER else "memory")
                return Observation(
                    JobState.FAILED,
                    Reason.OOM_KILLED,
                    f"{role} {index} went over its memory limit ({limit}) and was killed",
                    code,
                    statuses,
                )
        if pserver_lost is not None:
            index, code = pserver_lost
            return Observation(
                JobState.FAILED,
                Reason.PSERVER_LOST,
                f"pserver {index} {processes.describe_exit(code)}; the job cannot go on without it",
                code,
                statuses,
            )
        if trainer_failed is not None:
            index, code, restarts = trainer_failed
            reason = Reason.BACKOFF_LIMIT if max_retries else Reason.TRAINER_FAILED
            retries = f" after {restarts} restart(s)" if max_retries else ""
            return Observation(
                JobState.FAILED, reason, f"trainer {index} {processes.describe_exit(code)}{retries}", code, statuses
            )
        if trainers_done == job.trainers:
            return Observation(JobState.SUCCEEDED, workers=statuses, exit_code=0)
        return Observation(JobState.RUNNING if all_running else JobState.PENDING, workers=statuses)

    def _restart(self, job: Job, worker: Worker, code: int | None) -> None:
        worker.restarts += 1
        worker.message = f"restarted after it {processes.describe_exit(code)}"
        self._spawn(job, worker, self.package(job))

    def _groups(self, job: Job) -> list[tuple[int, int, int, int]]:
        return [
            (r["pid"], r["pid_start"], r["supervisor"], r["supervisor_start"])
            for r in job.engine_data.values()
            if isinstance(r, dict) and "supervisor" in r
        ]

    def stop(self, job: Job) -> bool:
        """SIGTERM every process group now; SIGKILL what is left once the grace period has passed."""
        alive = [g for g in self._groups(job) if processes.is_alive(g[0], g[1]) or processes.is_alive(g[2], g[3])]
        if not alive:
            return True
        first = job.engine_data.get("stop_requested_at")
        now = time.time()
        if first is None:
            job.engine_data = {**job.engine_data, "stop_requested_at": now}
            Job.objects.filter(pk=job.pk).update(engine_data=job.engine_data)
            first = now
        sig = signal.SIGKILL if now - float(first) >= settings.PADDLECLOUD_KILL_GRACE_SECONDS else signal.SIGTERM
        for pid, pid_start, supervisor, supervisor_start in alive:
            targets = [p for p, s in ((pid, pid_start), (supervisor, supervisor_start)) if processes.is_alive(p, s)]
            processes.signal_groups(targets, sig)
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
