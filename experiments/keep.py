"""`keep_checkpoints: N`: only the best N trials of an experiment keep their checkpoints; the others lose theirs once
they ended (the portal removes their `checkpoints` folder, as `paddlectl file rm -r` would, its space back to quota).

The best are by the experiment's metric, among every trial that reported it (one still running too: its best can
only improve, so it stays ahead of those it passed). Nothing is removed while fewer than N trials reported it, nor
from a trial that runs; a trial that never reported the metric ranks below every one that did. A trial's
checkpoints are removed once (Trial.checkpoints_removed), at most MAX_REMOVALS trials a pass, outside any lock.
"""

from __future__ import annotations

import logging

from paddlecloud.contract.layout import CHECKPOINTS_NAME

from core.errors import DomainError, NotFound
from experiments import search
from experiments.models import Experiment, Trial
from jobs.files.layout import output_logical
from jobs.models import TERMINAL_STATES, Job
from storage import files

log = logging.getLogger(__name__)

MAX_REMOVALS = 20  # trials whose checkpoints one pass removes (each a tree on the PFS); the rest on the next passes
ENDED = ("stopped", *TERMINAL_STATES)  # the trial states whose job ran and ended (experiments.services.FINAL's)


def best_trials(experiment: Experiment, metric: search.Metric, keep: int) -> list[int]:
    """The ids of the `keep` best trials by the metric (the lower index first among equals)."""
    order = "best" if metric.goal == "minimize" else "-best"
    ranked = Trial.objects.filter(experiment=experiment, best__isnull=False).order_by(order, "index")
    return list(ranked.values_list("pk", flat=True)[:keep])


def prune(experiment: Experiment) -> int:
    """Remove the checkpoints of trials that ended outside the best; how many trials lost theirs this pass."""
    keep = search.keep_checkpoints(experiment.sweep)
    metric = search.running_settings(experiment.sweep)[1]
    if keep is None or metric is None:
        return 0
    kept = best_trials(experiment, metric, keep)
    if len(kept) < keep:
        return 0  # too few reported the metric yet to know who is out
    out = (
        Trial.objects.filter(experiment=experiment, state__in=ENDED, checkpoints_removed=False, job__released=True)
        .exclude(pk__in=kept)
        .select_related("job", "job__owner", "job__datacenter")
        .order_by("index")[:MAX_REMOVALS]
    )
    removed = 0
    for trial in out:
        assert trial.job is not None  # job__released=True
        _remove(trial.job)
        Trial.objects.filter(pk=trial.pk).update(checkpoints_removed=True)
        removed += 1
    return removed


def _remove(job: Job) -> None:
    """The run's checkpoints folder, removed beneath its owner's home with the owner's rights; none is fine."""
    path = f"{output_logical(job)}/{CHECKPOINTS_NAME}"
    try:
        files.remove(job.owner, path, recursive=True)
    except NotFound:
        pass  # it never saved one
    except DomainError as exc:  # the PFS is away, or the folder is not one: said, and not tried again
        log.warning("experiment trial %s: its checkpoints at %s were not removed: %s", job.name, path, exc)
