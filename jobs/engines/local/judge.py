"""The local engine's judge: what a job's processes did (as the supervisor saw them) -> the job's Observation.

A pserver never ends by itself while the job runs: one that did is lost, and the job fails with it
(trainers would exit 0 with nothing learned). A failed trainer fails the job once its retries are
spent (of several, the one that ended first, unless it died of a collective's lost peer and another failed of
itself just after it); a worker stopped at a limit (memory first, then processes)
is named for it, and a trainer whose launcher gave up on the gloo rendezvous at its bound (exit code 72)
fails it `RendezvousTimeout`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from paddlecloud.contract import exitcodes

from jobs.engines.base import Observation, WorkerStatus
from jobs.engines.local import processes
from jobs.engines.local.supervisor import STOPPED_AFTER_SUCCESS, Supervisor
from jobs.files import errorline
from jobs.files.logfiles import log_tail
from jobs.models import Job, JobState, Reason, Role, Worker, WorkerState

TrainerFailure = tuple[int, int | None, int, str]  # (index, exit code, restarts, message)
# How much later than a peer's collective error a trainer's own failure may have ended and still be named first: its
# launcher's wait for what its entry left (client/paddlecloud/runtime/reaper.py: 2 + 5 + 5 s) and a margin.
ENDS_CLOSE = 15.0


@dataclass
class Tally:
    """What one look at a job's workers found: whether all run, the first lost pserver and failed trainer."""

    all_running: bool = True
    trainers_done: int = 0
    pserver_lost: tuple[int, int | None] | None = None  # (index, exit code)
    trainer_failed: TrainerFailure | None = None  # the failed trainer that ended first (Judge.first_to_end)
    # Every failed trainer (index, exit code): a limit's kill among them is the cause, whichever failed first
    # (in a collective job the others die of the killed one's silence, and a look may see them all ended).
    failed_trainers: list[tuple[int, int | None]] = field(default_factory=list)


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


class Judge:
    """Turns what the supervisor sees of a job's processes into worker states and the job's state."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    def log_reason(self, job: Job, worker: Worker) -> str:
        """What the worker's log's end says of its failure (jobs.files.errorline.worker_reason); "" without a log."""
        return errorline.worker_reason(log_tail(job, worker.name), worker.role)

    def first_to_end(self, job: Job, known: TrainerFailure | None, failure: TrainerFailure) -> TrainerFailure:
        """Of two failed trainers, the cause: the one whose process ended first (its exit status file, written as
        it ended, is older), unless it quotes a collective's lost peer (errorline.collective_failure) and the other,
        which failed of itself, ended at most ENDS_CLOSE later. The others die of the first one's silence (gloo's
        time-out, a refused connection), and a look that finds them all ended must not name the lowest index
        instead (CI, 2026-11-30: trainer 1 was killed, the job said trainer 0's gloo TIMEOUT). Nor is the time
        alone enough: a trainer's launcher exits seconds after its entry when it waits for what the entry left
        running (reaper.reap_descendants: 2 s, then SIGTERM and 5 s, then SIGKILL and 5 s), and a peer's gloo
        error may end sooner than that (CI, the same day: trainer 1's entry exited 3, and trainer 0's refused gloo
        connection was written first)."""
        if known is None:
            return failure
        ended = {f[0]: self._ended_at(job, f[0]) for f in (known, failure)}  # one stat each
        first, then = sorted((known, failure), key=lambda f: ended[f[0]])
        died_of_a_peer = errorline.collective_failure(first[3]) and not errorline.collective_failure(then[3])
        return then if died_of_a_peer and ended[then[0]] - ended[first[0]] <= ENDS_CLOSE else first

    def _ended_at(self, job: Job, index: int) -> float:
        try:
            return self.supervisor.status_path(job, Role.TRAINER, index).stat().st_mtime
        except OSError:
            return math.inf  # no status: it did not end by itself (or its supervisor died); never the first

    def ended(self, job: Job, worker: Worker, code: int | None) -> tuple[WorkerState, str]:
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
        why = self.log_reason(job, worker)
        if code in exitcodes.LAUNCHER_CODES and why:
            return WorkerState.FAILED, why  # the launcher's own failure: its words say it all
        ended = f"{name} {processes.describe_exit(code)}"
        return WorkerState.FAILED, f"{ended}: {why}" if why else ended

    def verdict(self, job: Job, tally: Tally, statuses: list[WorkerStatus], max_retries: int) -> Observation:
        """The job's state from what its workers did: a lost pserver or a failed trainer (OOM first) fails it,
        its message naming the worker's exit and its last error line; once every trainer succeeded, a
        pserver that ended is no loss."""
        if tally.trainers_done == job.trainers and tally.trainer_failed is None:
            return Observation(JobState.SUCCEEDED, workers=statuses, exit_code=0)
        pserver_lost, trainer_failed = tally.pserver_lost, tally.trainer_failed
        failed = tally.failed_trainers or ([trainer_failed[:2]] if trainer_failed else [])
        culprits = ([(Role.PSERVER, *pserver_lost)] if pserver_lost else []) + [
            (Role.TRAINER, index, code) for index, code in failed
        ]
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
            if self._may_yet_be_explained(job, index, why, statuses):
                return Observation(JobState.RUNNING, workers=statuses)
            reason = Reason.BACKOFF_LIMIT if max_retries else Reason.TRAINER_FAILED
            if code == exitcodes.RENDEZVOUS:  # its launcher's bound: the message names it and who never came
                reason = Reason.RENDEZVOUS_TIMEOUT
            retries = f" after {restarts} restart(s)" if max_retries else ""
            ended = f"trainer {index} {processes.describe_exit(code)}"
            message = f"{ended}{retries}{_after(why, ended)}"
            return Observation(JobState.FAILED, reason, message, code, statuses)
        return Observation(JobState.RUNNING if tally.all_running else JobState.PENDING, workers=statuses)

    def _may_yet_be_explained(self, job: Job, index: int, why: str, statuses: list[WorkerStatus]) -> bool:
        """Whether to wait for the next look before naming a trainer that died of a collective's lost peer: another
        trainer still runs, and at most ENDS_CLOSE went by since it ended. The peer that was lost is often still
        ending: an OOM-killed rank's launcher writes its exit status only after its own waits, and a look between
        the two ends named trainer 0's gloo TIMEOUT, not trainer 1's OOM kill (CI, 2026-12-01)."""
        if not errorline.collective_failure(why):
            return False
        others = [s for s in statuses if s.role == Role.TRAINER and s.index != index]
        ended = self._ended_at(job, index)
        waiting = any(s.state == WorkerState.RUNNING for s in others) and ended != math.inf
        return waiting and time.time() - ended <= ENDS_CLOSE

    def _over_a_limit(
        self, job: Job, culprits: list[tuple[Role, int, int | None]], statuses: list[WorkerStatus]
    ) -> Observation | None:
        """The failure of a worker the kernel stopped at a limit (memory first, then processes), or None;
        the worker's row says it too."""
        for role, index, code in culprits:
            if processes.oom_killed(self.supervisor.status_path(job, role, index)):
                limit = job.spec.get("psmemory" if role == Role.PSERVER else "memory")
                message = f"{role} {index} went over its memory limit ({limit}) and was killed"
                _set_message(statuses, role, index, message)
                return Observation(JobState.FAILED, Reason.OOM_KILLED, message, code, statuses)
        for role, index, code in culprits:
            if refused := processes.forks_refused(self.supervisor.status_path(job, role, index)):
                datacenter = self.supervisor.datacenter
                message = (
                    f"{role} {index} {processes.describe_exit(code)} after {refused} fork(s) were refused at "
                    f"the datacenter's limit of {datacenter.job_pids_limit} processes per worker (and "
                    f"{datacenter.user_pids_limit:,} for all of one user's workers on a host)"
                )
                _set_message(statuses, role, index, message)
                return Observation(JobState.FAILED, Reason.PIDS_LIMIT, message, code, statuses)
        return None
