"""An experiment's keep policy, `keep: {best: N, latest: M}` (default: the best 1 and the latest 1): when a trial
has ended, the portal keeps those of its checkpoints (the best N by the metric each was saved with, under the
experiment's goal, and the latest M by step) and removes the others, as `paddlectl file rm -r` would: beneath its
owner's home, its space back to the quota.

A checkpoint saved without a metric is never among the best; an experiment without a metric keeps the latest M
only (at least one). A trial that runs is never touched (its script's own `checkpoint.save(keep=, keep_best=)`
decides meanwhile), so the checkpoint `then:` or `-resume-from` starts from, its latest, always stays. A trial is
pruned once (Trial.checkpoints_pruned), at most MAX_TRIALS trials a pass, outside any lock; only its newest
checkpoints.MAX_LISTED are looked at.
"""

from __future__ import annotations

import logging

from core.errors import DomainError, NotFound
from experiments import search
from experiments.models import Experiment, Trial
from jobs.files import checkpoints
from jobs.models import TERMINAL_STATES, Job
from storage import files

log = logging.getLogger(__name__)

MAX_TRIALS = 5  # trials pruned in one pass (each may hold many checkpoints); the rest on the next passes
ENDED = ("stopped", *TERMINAL_STATES)  # the trial states whose job ran and ended (experiments.services.FINAL's)


def kept_steps(found: list[tuple[int, str, float | None]], best: int, latest: int, metric: search.Metric | None
               ) -> set[int]:  # fmt: skip
    """The steps a policy keeps among `found` (step, path, metric): the latest `latest`, and the best `best`."""
    by_step = sorted(step for step, _, _ in found)
    keep = set(by_step[-latest:]) if latest else set()
    if metric is not None and best:
        scored = [(value, step) for step, _, value in found if value is not None]
        scored.sort(key=lambda pair: (pair[0] if metric.goal == "minimize" else -pair[0], -pair[1]))
        keep |= {step for _, step in scored[:best]}
    return keep


def prune(experiment: Experiment) -> int:
    """Apply the keep policy to the trials that ended since the last pass; how many trials were pruned."""
    best, latest = search.keep_policy(experiment.sweep)  # checked when the experiment was made
    metric = search.running_settings(experiment.sweep)[1]
    due = (
        Trial.objects.filter(experiment=experiment, state__in=ENDED, checkpoints_pruned=False, job__released=True)
        .select_related("job", "job__owner", "job__datacenter")
        .order_by("index")[:MAX_TRIALS]
    )
    pruned = 0
    for trial in due:
        assert trial.job is not None  # job__released=True
        found = checkpoints.steps_and_metrics(trial.job)
        keep = kept_steps(found, best, latest, metric)
        for step, path, _ in found:
            if step not in keep:
                _remove(trial.job, path)
        Trial.objects.filter(pk=trial.pk).update(checkpoints_pruned=True)
        pruned += 1
    return pruned


def _remove(job: Job, path: str) -> None:
    """One checkpoint folder, removed beneath its owner's home with the owner's rights; gone already is fine."""
    try:
        files.remove(job.owner, path, recursive=True)
    except NotFound:
        pass
    except DomainError as exc:  # the PFS is away, or the path is not one to remove: said, not tried again
        log.warning("experiment trial %s: checkpoint %s was not removed: %s", job.name, path, exc)
