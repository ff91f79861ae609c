"""Runs side by side: /compare/?jobs=a,b,c (names or uids, the user's own; an operator's any) as a table of
params and the last value of every metric, and the curves of one metric overlaid (static/js/runs.js reads them
from /compare/curves.json, the same shape the experiment page's curves have)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from jobs.follow import metrics
from jobs.lookup import job_named
from jobs.models import ACTIVE_STATES, Job

MAX_RUNS = 20  # runs compared on one page: each is a file read
MAX_REF = 48  # characters of a job's uid or name
MAX_CURVE_BYTES = 16 * 1024 * 1024  # of metrics files one curves answer reads, shared among its runs
MAX_CURVE_POINTS = 1000  # per run drawn; more are thinned evenly
TAIL_BYTES = 64 * 1024  # the table's last values: read from the end of each run's file
MAX_METRIC = 64  # characters of a metric's name (paddlecloud.metrics' own rule)


def refs_of(request: HttpRequest) -> list[str]:
    """The `jobs` asked for, as `?jobs=a,b` or `?jobs=a&jobs=b`: bounded, each at most MAX_REF characters."""
    refs: list[str] = []
    for value in request.GET.getlist("jobs")[:MAX_RUNS]:
        refs += [ref.strip()[:MAX_REF] for ref in value[: MAX_RUNS * (MAX_REF + 1)].split(",") if ref.strip()]
    return list(dict.fromkeys(refs))[:MAX_RUNS]


def jobs_of(request: HttpRequest) -> tuple[list[Job], list[str]]:
    """The runs found (in the order asked) and the refs not found among the user's."""
    visible = Job.objects.select_related("owner", "datacenter").visible_to(request.user, everyone=True)
    found: list[Job] = []
    missing: list[str] = []
    for ref in refs_of(request):
        job = job_named(visible, ref, request.user)
        if job is None:
            missing.append(ref)
        elif job not in found:
            found.append(job)
    return found, missing


def last_values(job: Job) -> dict[str, float]:
    values: dict[str, float] = {}
    for point in metrics.last_points(job, "trainer-0", 50, TAIL_BYTES):
        values.update(point["values"])
    return values


def run_entry(
    job: Job, label: str, metric: str, budget: int, points: int = MAX_CURVE_POINTS, **extra: Any
) -> dict[str, Any]:
    """One run as the curves answer has it: label, link, state, params, and the points of `metric`."""
    return {
        "label": label, "uid": job.uid, "href": reverse("job-detail", args=[job.uid]), "state": job.state,
        "params": job.spec.get("params") or {}, "active": job.state in ACTIVE_STATES,
        "points": metrics.curve(job, metric, budget, points), **extra,
    }  # fmt: skip


def metric_of(request: HttpRequest, default: str) -> str:
    return (request.GET.get("metric") or default)[:MAX_METRIC]


@login_required
def compare_page(request: HttpRequest) -> HttpResponse:
    jobs, missing = jobs_of(request)
    rows = [(job, last_values(job)) for job in jobs]
    names = sorted({name for _, values in rows for name in values})
    params = sorted({name for job in jobs for name in (job.spec.get("params") or {})})
    metric = metric_of(request, "loss" if "loss" in names else (names[0] if names else "loss"))
    table = [(job, [(job.spec.get("params") or {}).get(p) for p in params], [v.get(n) for n in names])
             for job, v in rows]  # fmt: skip
    refs = ",".join(job.uid for job in jobs)
    api = f"{reverse('compare-curves')}?{urlencode({'jobs': refs, 'metric': metric})}"
    context = {"rows": table, "params": params, "names": names, "metric": metric, "missing": missing,
               "refs": refs, "max_runs": MAX_RUNS, "api": api}  # fmt: skip
    return render(request, "jobs/compare.html", context, status=200 if jobs or not missing else 404)


@login_required
def compare_curves(request: HttpRequest) -> JsonResponse:
    jobs, _ = jobs_of(request)
    metric = metric_of(request, "loss")
    budget = MAX_CURVE_BYTES // max(len(jobs), 1)
    params = sorted({name for job in jobs for name in (job.spec.get("params") or {})})
    runs = [run_entry(job, job.name, metric, budget) for job in jobs]
    return JsonResponse({"metric": metric, "goal": "minimize", "params": params, "runs": runs})
