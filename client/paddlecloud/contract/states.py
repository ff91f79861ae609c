"""The names both sides of the wire give a job's, a worker's and an image build's states, and a job's workers.

The portal's models take their values from here (jobs.models.JobState, WorkerState and Role,
images.models.BuildState), and the client compares the API's answers with the same strings, so a
state renamed on one side cannot silently stop matching on the other.
"""

from __future__ import annotations

QUEUED = "queued"  # row written, its task enqueued on commit (a job or a build)
SUBMITTING = "submitting"  # a worker is asking the engine to start the job
PENDING = "pending"  # the engine accepted it; processes/pods not all running yet
RUNNING = "running"  # every process/pod started
BUILDING = "building"  # an image build's builder runs
SUCCEEDED = "succeeded"
FAILED = "failed"
KILLED = "killed"  # a job (or a worker) the owner or an operator killed
CANCELLED = "cancelled"  # an image build the owner or an operator cancelled

JOB_STATES = (QUEUED, SUBMITTING, PENDING, RUNNING, SUCCEEDED, FAILED, KILLED)
ACTIVE_JOB_STATES = (QUEUED, SUBMITTING, PENDING, RUNNING)
STARTED_JOB_STATES = (PENDING, RUNNING)
TERMINAL_JOB_STATES = (SUCCEEDED, FAILED, KILLED)

WORKER_STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, KILLED)

BUILD_STATES = (QUEUED, BUILDING, SUCCEEDED, FAILED, CANCELLED)
ACTIVE_BUILD_STATES = (QUEUED, BUILDING)
TERMINAL_BUILD_STATES = (SUCCEEDED, FAILED, CANCELLED)

PSERVER = "pserver"
TRAINER = "trainer"
ROLES = (PSERVER, TRAINER)


def worker_name(role: str, index: int) -> str:
    """How a worker is named to users, in logs and in cursors: "trainer-0", "pserver-1"."""
    return f"{role}-{index}"


def worker_names(trainers: int, pservers: int) -> list[str]:
    """Every worker's name, trainers first: what `worker=` of the log API accepts."""
    return [worker_name(TRAINER, i) for i in range(trainers)] + [worker_name(PSERVER, i) for i in range(pservers)]
