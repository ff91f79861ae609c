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

from experiments import search
from experiments.models import Experiment, Trial
from jobs.files import checkpoints
from jobs.models import TERMINAL_STATES

MAX_TRIALS = 5  # trials pruned in one pass (each may hold many checkpoints); the rest on the next passes
ENDED = ("stopped", *TERMINAL_STATES)  # the trial states whose job ran and ended (experiments.services.FINAL's)


def prune(experiment: Experiment) -> int:
    """Apply the keep policy to the trials that ended since the last pass; how many trials were pruned."""
    best, latest = search.keep_policy(experiment.sweep)  # checked when the experiment was made
    metric = search.running_settings(experiment.sweep)[1]
    best, goal = (best, metric.goal) if metric is not None else (0, "minimize")  # no metric: no best
    due = (
        Trial.objects.filter(experiment=experiment, state__in=ENDED, checkpoints_pruned=False, job__released=True)
        .select_related("job", "job__owner", "job__datacenter")
        .order_by("index")[:MAX_TRIALS]
    )
    pruned = 0
    for trial in due:
        assert trial.job is not None  # job__released=True
        checkpoints.prune(trial.job, best, latest, goal)
        Trial.objects.filter(pk=trial.pk).update(checkpoints_pruned=True)
        pruned += 1
    return pruned
