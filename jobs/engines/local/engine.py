"""The `local` engine: every pserver and trainer is a process on the worker's host, in the job's own network.

It is its own controller: `poll` restarts failed trainers up to max_retries, and reports a job failed
as soon as a pserver dies (trainers would otherwise exit 0 with nothing learned). Every process runs
in a bubblewrap sandbox as an unprivileged user, seeing only its user's /pfs paths (world.py, storage/paths.py).
The supervisor (supervisor.py) starts, watches and stops the processes; the judge (judge.py) says what
they did; this module is the Engine the tasks call, and it writes no row: it reports to the Recorder.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from paddlecloud.contract.states import worker_name

from datacenters.models import Datacenter
from jobs.engines.base import Engine, EngineError, Observation, Recorder, WorkerStatus
from jobs.engines.local import events, gpus, held_open, processes, runtimes, usage
from jobs.engines.local import world as local_world
from jobs.engines.local.judge import Judge, Tally
from jobs.engines.local.supervisor import HOST, LAYER_BUILD, Supervisor
from jobs.engines.usage_samples import WorkerUsage
from jobs.files.logfiles import LogChunk, parse_cursor, read_log_file
from jobs.models import STARTED_STATES, TERMINAL_STATES, Job, JobState, Reason, Role, Worker, WorkerState

log = logging.getLogger(__name__)

LAYER_WALK_SECONDS = 2.0  # a user's layer cache measured for the storage quota: at most this long


def _plan(job: Job) -> list[tuple[Role, int]]:
    return [(Role.PSERVER, i) for i in range(job.pservers)] + [(Role.TRAINER, i) for i in range(job.trainers)]


def _still_wanted(job: Job) -> bool:
    """The job is not final, as the database says now (a kill may have come after this copy was read)."""
    if job.state in TERMINAL_STATES:
        return False
    return Job.objects.filter(pk=job.pk).exclude(state__in=TERMINAL_STATES).exists()


class LocalEngine(Engine):
    def __init__(self, datacenter: Datacenter) -> None:
        super().__init__(datacenter)
        self.supervisor = Supervisor(datacenter)
        self.judge = Judge(self.supervisor)

    def held_open_bytes(self, owner: Any) -> int:
        home = Path(self.datacenter.storage_root, "home", owner.get_username())
        return held_open.held_open_bytes(local_world.job_ids(owner.pk)[0], home)

    def layer_bytes(self, owner: Any) -> int:
        return runtimes.layer_bytes(owner.pk, LAYER_WALK_SECONDS)

    def start(self, job: Job, recorder: Recorder) -> None:
        package = self.package(job)
        self.supervisor.sandbox_probe()  # no sandbox, no job: refused before anything starts
        if not gpus.acquire(job):
            return  # waits, pending; the reconciler starts it once its GPUs are free (see _observe)
        self.supervisor.ports(job, recorder)
        if self.supervisor.start_layer_build(job, package, recorder):
            return  # its processes start once their layer is built (see _layer_build)
        for role, index in _plan(job):
            if not _still_wanted(job):
                return  # killed (or failed) while starting: nothing more starts; its release stops the rest
            recorder.planned(job, [(role, index)])
            worker = Worker.objects.get(job=job, role=role, index=index)
            if worker.name not in job.engine_data:
                self.supervisor.spawn(job, worker, package, recorder)

    def started(self, job: Job) -> None:
        events.announce(job.pk)  # its processes run already: the control worker records them running now

    def poll(self, jobs: list[Job], recorder: Recorder) -> dict[int, Observation]:
        seen = {}
        for job in jobs:
            try:
                seen[job.pk] = self._observe(job, recorder)
            except OSError as exc:  # e.g. a folder of its own it broke: looked at again next cycle, the others now
                log.warning("job %s: cannot look at its processes: %s", job.uid, exc)
        return seen

    def _waiting_for_gpus(self, job: Job, recorder: Recorder) -> Observation | None:
        """Start a job that waited for GPUs once they are free; the pending observation while it waits."""
        if job.state not in STARTED_STATES or not gpus.needed(job) or gpus.assigned(job):
            return None
        if gpus.acquire(job):
            try:
                self.start(job, recorder)
            except EngineError as exc:
                return Observation(JobState.FAILED, Reason.SUBMIT_FAILED, str(exc))
            return None
        free = gpus.free_count(self.datacenter)
        count = gpus.needed(job)
        message = f"waiting for {count} GPU{'s' if count > 1 else ''} ({free} of {len(self.datacenter.gpus)} free)"
        return Observation(JobState.PENDING, Reason.UNSCHEDULABLE, message)

    def _observe(self, job: Job, recorder: Recorder | None) -> Observation:
        """What the job's processes did; with a recorder, a waiting job is started and a failed trainer
        restarted (without one, nothing is done: a look only)."""
        if recorder is not None:
            waiting = self._waiting_for_gpus(job, recorder)
            if waiting is not None:
                return waiting
        built = self._layer_build(job, recorder)
        if built is not None:
            return built
        workers = {(w.role, w.index): w for w in Worker.objects.filter(job=job)}
        statuses: list[WorkerStatus] = []
        tally = Tally()
        max_retries = int(job.spec.get("max_retries", 0))
        for role, index in _plan(job):
            worker = workers.get((role, index))
            if worker is None or worker.name not in job.engine_data:
                tally.all_running = False
                continue
            statuses.append(self._worker_status(job, worker, tally, max_retries, recorder))
        return self.judge.verdict(job, tally, statuses, max_retries)

    def _layer_build(self, job: Job, recorder: Recorder | None) -> Observation | None:
        """While the job's requirements layer is built, before any process of it: pending while the build runs;
        failed (trainer 0's row saying why, from its log) when it failed; its processes started (with a recorder)
        once it succeeded. None when no build is, or was, in the way."""
        fate = self.supervisor.layer_build_fate(job)
        if fate is None or any(worker_name(role, index) in job.engine_data for role, index in _plan(job)):
            return None
        running, code = fate
        if running or (code == 0 and recorder is None):
            return Observation(JobState.PENDING, message="installing requirements.txt into its environment")
        if code == 0:
            assert recorder is not None
            try:
                self.start(job, recorder)
            except EngineError as exc:
                return Observation(JobState.FAILED, Reason.SUBMIT_FAILED, str(exc))
            return None
        why = self.judge.log_reason(job, Worker(job=job, role=Role.TRAINER, index=0))  # its log has the build's output
        message = why or f"installing requirements failed: its build step {processes.describe_exit(code)}"
        trainer_status = WorkerStatus(
            role=Role.TRAINER,
            index=0,
            state=WorkerState.FAILED,
            host=HOST,
            pid=job.engine_data[LAYER_BUILD]["pid"],
            exit_code=code,
            message=message,
        )
        return Observation(JobState.FAILED, Reason.LAUNCH_FAILED, message, code, [trainer_status])

    def _worker_status(
        self, job: Job, worker: Worker, tally: Tally, max_retries: int, recorder: Recorder | None
    ) -> WorkerStatus:
        """One started worker's status; a trainer that failed with retries left is restarted here."""
        role, index = Role(worker.role), worker.index
        running, code = self.supervisor.fate(job, worker)
        state, message = WorkerState.RUNNING, ""
        if not running:
            state, message = self.judge.ended(job, worker, code)
            if role == Role.PSERVER and state != WorkerState.SUCCEEDED:
                tally.pserver_lost = tally.pserver_lost or (index, code)
            elif role == Role.TRAINER and state == WorkerState.SUCCEEDED:
                tally.trainers_done += 1
            elif role == Role.TRAINER and recorder and worker.restarts < max_retries and _still_wanted(job):
                try:
                    self.supervisor.restart(job, worker, code, self.package(job), recorder)
                    state, message = WorkerState.RUNNING, f"restarted after it {processes.describe_exit(code)}"
                    code = None
                except EngineError as exc:  # e.g. its runtime was removed: fail this job, not the loop
                    message = f"{message}; cannot restart it: {exc}"
                    failure = (index, code, worker.restarts, message)
                    tally.trainer_failed = self.judge.first_to_end(job, tally.trainer_failed, failure)
                    tally.failed_trainers.append((index, code))
            elif role == Role.TRAINER:
                failure = (index, code, worker.restarts, message)
                tally.trainer_failed = self.judge.first_to_end(job, tally.trainer_failed, failure)
                tally.failed_trainers.append((index, code))
        return WorkerStatus(
            role=role,
            index=index,
            state=state,
            host=HOST,
            pid=job.engine_data[worker.name]["pid"],
            started_at=worker.started_at,
            restarts=worker.restarts,
            exit_code=code,
            message=message,
        )

    def final_workers(self, job: Job) -> list[WorkerStatus]:
        return self._observe(job, None).workers

    def measured_usage(self, job: Job) -> dict[str, tuple[float | None, int | None]]:
        """From each process's cgroup, as its supervisor read it at exit (the last run of a restarted one)."""
        return {
            worker_name(role, index): processes.measured(self.supervisor.status_path(job, role, index))
            for role, index in _plan(job)
        }

    def sample_usage(self, job: Job) -> dict[str, WorkerUsage]:
        """From each running worker's cgroup (its process tree where there is none) and the GPUs it holds."""
        return usage.sample(job)

    def finish(self, job: Job, recorder: Recorder) -> bool:
        """Every trainer exited 0: stop the pservers (they never exit by themselves) and say so in their logs."""
        return self.supervisor.stop_pservers(job, recorder)

    def stop(self, job: Job, recorder: Recorder, grace: float | None = None) -> bool:
        """SIGTERM every process group now; SIGKILL what is left once the grace period has passed. Once none is
        left, what the job left in its user's layer cache that is no layer goes (runtimes.tidy_layers)."""
        stopped = self.supervisor.stop(job, recorder, grace)
        if stopped:
            try:
                runtimes.tidy_layers(job.owner_id)
            except OSError as exc:  # the cache's own trouble: the next job's tidying tries again
                log.warning("job %s: cannot tidy its user's layer cache: %s", job.uid, exc)
        return stopped

    def read_log(self, job: Job, worker: str, cursor: str) -> LogChunk:
        final = job.state in TERMINAL_STATES and job.released
        chunk = read_log_file(job, worker, cursor, final=final)
        return chunk or LogChunk(text="", cursor=str(parse_cursor(cursor)), complete=final)

    def cleanup(self, job: Job, recorder: Recorder) -> bool:
        # Output and logs stay on the user's storage (they are the user's files); processes go.
        stopped = self.stop(job, recorder)
        if stopped:
            shutil.rmtree(Path(settings.VAR_DIR) / "local-engine" / job.uid, ignore_errors=True)
        return stopped
