"""Experiment pages: the list, and one experiment's trials (sortable by any column or param, filtered by state,
paged), their curves overlaid and parallel coordinates (static/js/runs.js, from curves.json), the trials as CSV,
and kill. Every page is the owner's own: another user's experiment is a 404."""

from __future__ import annotations

import csv
import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from experiments import services
from experiments.models import Experiment, Trial
from jobs.web.compare import MAX_CURVE_BYTES, run_entry

PAGE_SIZE = 200  # trials per page
LIST_SIZE = 50  # experiments per page of the list
MAX_CURVES = 50  # trials whose curves one answer draws, the best by the metric: more would not be readable
CURVE_POINTS = 300  # per trial's curve: each point drawn is one line of its metrics file parsed
MAX_REF = 60  # characters of an experiment's uid or name
COLUMNS = ("index", "state", "best", "last", "steps")
TRIAL_STATES = ("waiting", "queued", "running", "succeeded", "failed", "killed", "stopped", "refused", "removed")


def _experiment(request: HttpRequest, ref: str) -> Experiment:
    found = Experiment.objects.named(request.user.pk, ref[:MAX_REF])
    if found is None:
        raise Http404("experiment not found")
    return found


def _param_key(value: object) -> tuple[int, Any]:
    """Sorts any params together: numbers, then text, then a trial without the param."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (2, "") if value is None else (1, str(value))


def sorted_ids(experiment: Experiment, sort: str, state: str) -> list[int]:
    """The trials' ids in the order asked: `metric` (the best first), a column or `param:<name>`, `-` descending."""
    trials = experiment.trials.all() if not state else experiment.trials.filter(state=state)
    descending, field = sort.startswith("-"), sort.lstrip("-")
    if field.startswith("param:"):
        name = field.removeprefix("param:")
        rows = list(trials.values_list("pk", "params", "index"))
        rows.sort(key=lambda row: (_param_key((row[1] or {}).get(name)), row[2]), reverse=descending)
        return [pk for pk, _, _ in rows]
    if field in COLUMNS:
        return list(trials.order_by(f"{'-' if descending else ''}{field}", "index").values_list("pk", flat=True))
    return list(experiment.trials_by_metric().filter(pk__in=trials.values("pk")).values_list("pk", flat=True))


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    mine = Experiment.objects.filter(owner_id=request.user.pk).annotate(total=Count("trials"))
    mine = mine.order_by("-created_at", "-id")  # the newest first (an annotation drops the Meta ordering)
    page = Paginator(mine, LIST_SIZE).get_page(request.GET.get("page"))
    rows = []
    for experiment in page.object_list:  # one query each for its best trial: LIST_SIZE at most
        best = experiment.trials_by_metric().exclude(best=None).first()
        rows.append((experiment, best, experiment.total))  # type: ignore[attr-defined]  # the annotation
    return render(request, "experiments/list.html", {"page": page, "rows": rows})


@login_required
def experiment_detail(request: HttpRequest, ref: str) -> HttpResponse:
    experiment = _experiment(request, ref)
    params = list((experiment.sweep or {}).get("params") or {})
    sort = request.GET.get("sort", "metric")[:50]
    allowed = {"metric", *COLUMNS, *(f"param:{p}" for p in params)}
    if sort.lstrip("-") not in allowed:
        sort = "metric"
    state = request.GET.get("state", "")
    state = state if state in TRIAL_STATES else ""
    ids = sorted_ids(experiment, sort, state)
    page = Paginator(ids, PAGE_SIZE).get_page(request.GET.get("page"))
    found = Trial.objects.select_related("job").in_bulk(list(page.object_list))
    trials = [found[pk] for pk in page.object_list if pk in found]
    rows = [(t, [(t.params or {}).get(p) for p in params]) for t in trials]
    found_counts = dict(experiment.trials.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    counts = {s: found_counts.get(s, 0) for s in TRIAL_STATES}
    context = {
        "experiment": experiment, "params": params, "rows": rows, "page": page, "sort": sort, "state": state,
        "counts": {s: n for s, n in counts.items() if n}, "total": sum(counts.values()),
        "metric": experiment.metric or "", "columns": COLUMNS,
        "best": experiment.trials_by_metric().exclude(best=None).select_related("job").first(),
        "api": reverse("experiment-curves", args=[experiment.uid]), "parcoords": True,
        "sweep": json.dumps(experiment.sweep, indent=2, sort_keys=True),
    }  # fmt: skip
    return render(request, "experiments/detail.html", context)


@login_required
def experiment_curves(request: HttpRequest, ref: str) -> JsonResponse:
    """The best MAX_CURVES trials that have a job: their params, best value and the curve of the metric (the
    parallel coordinates draw these too; the table and the CSV have every trial)."""
    experiment = _experiment(request, ref)
    metric = experiment.metric or "loss"
    trials = experiment.trials_by_metric().exclude(job=None).select_related("job__owner", "job__datacenter")
    trials = trials[:MAX_CURVES]
    budget = MAX_CURVE_BYTES // max(len(trials), 1)
    runs = [run_entry(t.job, f"trial {t.index}", metric, budget, CURVE_POINTS, best=t.best, index=t.index)
            for t in trials if t.job]  # fmt: skip
    params = list((experiment.sweep or {}).get("params") or {})
    return JsonResponse({"metric": metric, "goal": experiment.goal, "params": params, "runs": runs})


@login_required
def experiment_csv(request: HttpRequest, ref: str) -> HttpResponse:
    """Every trial (index order, at most search.MAX_TRIALS): its params, state, best, last, steps, job, message."""
    experiment = _experiment(request, ref)
    params = list((experiment.sweep or {}).get("params") or {})
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{experiment.uid}-trials.csv"'
    writer = csv.writer(response, lineterminator="\n")
    writer.writerow(["index", *params, "state", "best", "last", "steps", "job", "message"])
    for trial in experiment.trials.order_by("index").select_related("job").iterator(chunk_size=500):
        values = [(trial.params or {}).get(p) for p in params]
        writer.writerow([trial.index, *values, trial.state, trial.best, trial.last, trial.steps,
                         trial.job.uid if trial.job else "", trial.message])  # fmt: skip
    return response


@login_required
@require_POST
def experiment_kill(request: HttpRequest, ref: str) -> HttpResponse:
    experiment = _experiment(request, ref)
    try:
        services.kill(experiment)
        messages.success(request, f"Experiment {experiment.name} killed: no more trials, the running ones stopped.")
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("experiment-detail", experiment.uid)
