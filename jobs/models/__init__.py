"""The jobs app's rows, one module a subject: the job (job.py), its dependencies (dependencies.py), its runtimes and
GPUs (runtimes.py), and what the scheduler keeps (scheduling.py). Every model is importable from here, as Django
and the migrations expect."""

from jobs.models.dependencies import JobDependency
from jobs.models.job import (
    ACTIVE_STATES,
    RESUME_CHECKPOINT,
    SPEC_EXPERIMENT,
    SPEC_TRIAL,
    STARTED_STATES,
    TERMINAL_STATES,
    EventKind,
    Job,
    JobEvent,
    JobQuerySet,
    JobState,
    Reason,
    Role,
    Worker,
    WorkerState,
)
from jobs.models.runtimes import GpuAssignment, Runtime, validate_runtime_name
from jobs.models.scheduling import FairShareUsage, PriorityClass, SchedulingPolicy, UsageRecord

__all__ = [
    "ACTIVE_STATES",
    "RESUME_CHECKPOINT",
    "SPEC_EXPERIMENT",
    "SPEC_TRIAL",
    "STARTED_STATES",
    "TERMINAL_STATES",
    "EventKind",
    "FairShareUsage",
    "GpuAssignment",
    "Job",
    "JobDependency",
    "JobEvent",
    "JobQuerySet",
    "JobState",
    "PriorityClass",
    "Reason",
    "Role",
    "Runtime",
    "SchedulingPolicy",
    "UsageRecord",
    "Worker",
    "WorkerState",
    "validate_runtime_name",
]
