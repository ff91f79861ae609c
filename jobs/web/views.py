"""Job pages: the list (filtered, self-refreshing), one job live, its logs, the log download, submit and clone;
the queue (with the operators' hold / release / front) and the usage by day."""

from __future__ import annotations

import json
from contextlib import suppress
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from csp.decorators import csp_update
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince
from django.views.decorators.http import require_POST
from paddlecloud.contract import quantity
from paddlecloud.contract import spec as rules

from core import streams
from core.csp import WASM
from core.errors import DomainError
from datacenters import quota
from datacenters.models import Datacenter, usable_datacenter
from jobs import hooks, services
from jobs.errors import LogRefused
from jobs.files import checkpoints, layout
from jobs.follow import logs, metrics
from jobs.lookup import job_named
from jobs.models import ACTIVE_STATES, RESUME_CHECKPOINT, TERMINAL_STATES, Job
from jobs.scheduling import accounting, queue
from jobs.web import listing
from jobs.web.forms import JobFilterForm, SubmitForm, initial_from_spec, priority_names
from registry.models import RegistrySecret
from storage import files, paths

# Browser uploads hash with XXH3-128 in WebAssembly (hash-wasm): compiling it needs this, eval() does not get it.

PAGE_SIZE = 25
MAX_DATACENTER = 40  # characters of a datacenter's name
MAX_REF = 48  # characters of a job's uid or name
PACKAGE_CHOICES = 200  # folders offered as packages, at most
# Without JavaScript the job page shows metrics as tables: the last points of the first trainers,
# read from the end of each file (a bound on the work one page view does).
NOSCRIPT_POINTS = 10
NOSCRIPT_TRAINERS = 8
NOSCRIPT_TAIL_BYTES = 64 * 1024
CHECKPOINTS_SHOWN = 10  # the newest; `paddlectl get checkpoints` and the API list up to 200
EVENTS_SHOWN = 50  # the job page shows the newest events; the API and `describe job` have all


def _job_for(request: HttpRequest, ref: str) -> Job:
    """A job by uid, or by name: the API's rule (jobs.lookup: the user's own run first, the active one, else
    the newest). Who sees what is `Job.objects.visible_to`: an operator sees any run, as with ?all=1."""
    jobs = Job.objects.select_related("owner", "datacenter").visible_to(request.user, everyone=True)
    job = job_named(jobs, ref, request.user)
    if job is None:
        raise Http404("job not found")
    return job


LISTED_TIME = "%Y-%m-%d %H:%M:%S"  # the list's times, in the portal's time zone (UTC, as the page says)


def duration(job: Job, now: datetime | None = None) -> timedelta | None:
    """How long it ran: started to finished, or to now while it runs."""
    if job.started_at is None:
        return None
    end = job.finished_at or (now or timezone.now())
    return max(end - job.started_at, timedelta(0))


def _decorate(jobs: list[Job]) -> list[Job]:
    """What the list's rows show beyond the model: how long each ran, and its start (or its queueing) as text.

    The times are formatted here, not by the template's date and timesince filters: those were about a quarter of
    the rows' rendering (a date filter parses its format string on every call; bench/pages.py)."""
    now = timezone.now()
    for job in jobs:
        job.duration = duration(job, now)  # type: ignore[attr-defined]
        if job.started_at is not None:
            started = timezone.localtime(job.started_at)
            job.started_iso = started.isoformat()  # type: ignore[attr-defined]
            job.started_text = started.strftime(LISTED_TIME)  # type: ignore[attr-defined]
            job.started_ago = timesince(job.started_at, now)  # type: ignore[attr-defined]
        else:
            job.queued_text = timezone.localtime(job.created_at).strftime(LISTED_TIME)  # type: ignore[attr-defined]
    return jobs


@login_required
def home(request: HttpRequest) -> HttpResponse:
    datacenters = list(Datacenter.objects.usable_by(request.user))
    recent = Job.objects.filter(owner_id=request.user.pk).listed().order_by("-created_at")[:8]
    quotas = [quota.report(request.user, dc) for dc in datacenters]
    any_active = any(job.is_active for job in recent)  # the page polls faster then
    return render(request, "home.html", {"quotas": quotas, "recent_jobs": recent, "any_active": any_active})

@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    form = JobFilterForm(request.GET)
    jobs = Job.objects.select_related("owner", "datacenter")
    status, sort = 200, listing.DEFAULT_SORT
    if form.is_valid():
        wanted = form.cleaned_data
        # Operators see everyone's jobs here (the jobs list), or one owner's with ?owner=.
        jobs = jobs.visible_to(request.user, owner=wanted["owner"] or None, everyone=True)
        if wanted["state"] == "active":
            jobs = jobs.filter(state__in=ACTIVE_STATES)
        elif wanted["state"]:
            jobs = jobs.filter(state=wanted["state"])
        if wanted["datacenter"]:
            jobs = jobs.filter(datacenter__name=wanted["datacenter"])
        if wanted["q"]:
            jobs = jobs.filter(name__icontains=wanted["q"])
        if wanted["since"]:  # whole days, in the portal's time zone (the page's times say which)
            jobs = jobs.filter(created_at__gte=_day_start(wanted["since"]))
        if wanted["until"]:
            jobs = jobs.filter(created_at__lt=_day_start(wanted["until"] + timedelta(days=1)))
        sort = wanted["sort"] or sort
    else:
        jobs, status = jobs.none(), 400
    # The page's ids first, from the index alone, then just those rows with their joins: an OFFSET
    # builds every row it skips, and with the joins the last of 400 pages took 3x the first.
    page = Paginator(listing.Pages(jobs, sort), PAGE_SIZE).get_page(request.GET.get("page"))
    ids = list(page.object_list)
    found = Job.objects.listed().in_bulk(ids)
    rows = _decorate([found[pk] for pk in ids if pk in found])
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "rows": rows,
        "form": form,
        "query": query.urlencode(),
        "any_active": any(job.is_active for job in rows),
        "sorted_by": listing.headers(request.GET, sort),
        "datacenters": Datacenter.objects.usable_by(request.user).values_list("name", flat=True),
    }
    template = "jobs/_table.html" if request.headers.get("HX-Request") else "jobs/list.html"
    return render(request, template, context, status=status)


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _detail_context(request: HttpRequest, job: Job) -> dict[str, Any]:
    total = job.events.count()
    return {
        "job": job,
        "events": job.events.order_by("time", "id")[max(total - EVENTS_SHOWN, 0) :],
        "events_hidden": max(total - EVENTS_SHOWN, 0),
        "workers": job.workers.defer("usage_history").order_by("role", "index"),
        "duration": duration(job),
        "output": layout.output_logical(job),
        "may_browse_output": job.owner_id == request.user.pk,
        "worker_names": job.worker_names,
        "build": hooks.image_source_of(job),
    }


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"  # as many digits as a chart's reader uses


def metrics_tables(job: Job) -> list[dict[str, Any]]:
    """Per trainer (the first few), its last points as rows under the metric names: the charts without JS."""
    tables = []
    for worker in job.worker_names[: min(job.trainers, NOSCRIPT_TRAINERS)]:
        points = metrics.last_points(job, worker, NOSCRIPT_POINTS, NOSCRIPT_TAIL_BYTES)
        if points:
            names = sorted({name for point in points for name in point["values"]})
            rows = [(point["step"], [_number(point["values"].get(name)) for name in names]) for point in points]
            tables.append({"worker": worker, "names": names, "rows": rows})
    return tables


def usage_summaries(job: Job) -> list[dict[str, Any]]:
    """Per worker (the first few), how many samples it has, its last and its peak: the resource charts without JS."""
    rows = []
    workers = job.workers.order_by("role", "index").values_list("role", "index", "usage_history")
    for role, index, history in workers[:NOSCRIPT_TRAINERS]:
        points = [p for p in history or [] if isinstance(p, list) and len(p) >= 3]
        if points:
            rows.append({"worker": f"{role}-{index}", "samples": len(points), "cpu": points[-1][1],
                         "memory": points[-1][2], "peak_memory": max(p[2] or 0 for p in points)})  # fmt: skip
    return rows


def usage_limits(job: Job) -> list[tuple[str, str, str]]:
    """(role, resource, amount) of each worker's limit its spec sets (cores; bytes), for the resource charts'
    limit lines: how close a worker runs to its OOM kill."""
    limits = []
    for role, cpu_field, memory_field in (("trainer", "cpu", "memory"), ("pserver", "pscpu", "psmemory")):
        if role == "pserver" and not job.pservers:
            continue
        with suppress(ValueError):
            if job.spec.get(cpu_field):
                limits.append((role, "cpu", str(quantity.cores(job.spec[cpu_field], field=cpu_field))))
            if job.spec.get(memory_field):
                limits.append((role, "memory", str(quantity.byte_count(job.spec[memory_field], field=memory_field))))
    return limits


@login_required
def job_detail(request: HttpRequest, ref: str) -> HttpResponse:
    job = _job_for(request, ref)
    context = _detail_context(request, job)
    runs = Job.objects.filter(owner_id=job.owner_id, name=job.name).order_by("-created_at")[:20]
    params = [(name, rules.param_text(value)) for name, value in sorted((job.spec.get("params") or {}).items())]
    context.update(checkpoints=checkpoints.listed(job)[-CHECKPOINTS_SHOWN:][::-1],
                   resumed=job.spec.get(RESUME_CHECKPOINT))  # fmt: skip
    context.update(runs=runs, env_names=sorted((job.spec.get("env") or {}).keys()), params=params,
                   metric_tables=metrics_tables(job), usage_rows=usage_summaries(job),
                   usage_limits=usage_limits(job))  # fmt: skip
    before = [f"preempted {times(preempted)}"] if (preempted := job.attempt - 1 - job.restarts) > 0 else []
    before += [f"restarted {times(job.restarts)} after failing"] if job.restarts else []
    context.update(_place_context(job), before_this=", ".join(before), last_failure=(job.failures or [None])[-1])
    return render(request, "jobs/detail.html", context)


@login_required
def job_live(request: HttpRequest, ref: str) -> HttpResponse:
    """The parts of the job page that change (state, timeline, counts, workers), polled while it is active."""
    return render(request, "jobs/_live.html", _detail_context(request, _job_for(request, ref)))


@login_required
def job_logs(request: HttpRequest, ref: str) -> HttpResponse:
    """The log viewer; `?worker=NAME` opens on that worker (the admin links each worker's log so)."""
    job = _job_for(request, ref)
    asked = request.GET.get("worker", "")
    chosen = asked if asked in job.worker_names else ""  # anything else: the viewer's own choice
    return render(request, "jobs/logs.html", {"job": job, "worker_names": job.worker_names, "chosen": chosen})


@login_required
def log_download(request: HttpRequest, ref: str, worker: str) -> HttpResponse | FileResponse:
    """The worker's whole log file, streamed through the API's reader (beneath the root, no links)."""
    job = _job_for(request, ref)
    if worker not in job.worker_names:
        raise Http404("no such worker")
    try:
        handle = logs.open_file(job, worker)
    except LogRefused as exc:
        return HttpResponse(exc.message, status=403, content_type="text/plain; charset=utf-8")
    if handle is None:
        raise Http404("this worker has written no log yet")
    response = FileResponse(
        handle, as_attachment=True, filename=f"{job.uid}-{worker}.log", content_type="text/plain; charset=utf-8"
    )
    if not streams.hold(response, request.user):
        handle.close()  # not response.close(): that ends the request (request_finished) early
        refused = HttpResponse(streams.refusal(), status=429, content_type="text/plain; charset=utf-8")
        refused["Retry-After"] = str(streams.RETRY_AFTER_SECONDS)
        return refused
    return response


@login_required
@require_POST
def job_kill(request: HttpRequest, ref: str) -> HttpResponse:
    job = _job_for(request, ref)
    if services.kill(job):
        messages.success(request, f"Job {job.name} killed; its name is free again.")
    else:
        messages.info(request, f"Job {job.name} had already ended ({job.state}).")
    return redirect("job-detail", ref=job.uid)


@login_required
@require_POST
def job_delete(request: HttpRequest, ref: str) -> HttpResponse:
    job = _job_for(request, ref)
    if job.state not in TERMINAL_STATES:
        messages.error(request, f"Job {job.name} is still {job.state}; kill it before deleting it.")
        return redirect("job-detail", ref=job.uid)
    services.remove(job)
    messages.success(request, f"Job {job.uid} deleted (its output folder stays in your files).")
    return redirect("job-list")


def _package_folders(request: HttpRequest, datacenters: list[Datacenter]) -> list[str]:
    """Folders of the user's homes offered as packages: the home's folders and those under jobs/."""
    found: list[str] = []
    for datacenter in datacenters:
        home = paths.home_logical(request.user, datacenter)
        for folder in (home, f"{home}/jobs"):
            try:
                entries = files.listing(request.user, folder, recursive=False)[0:PACKAGE_CHOICES]
            except DomainError:
                continue  # not there yet, or the storage is not mounted: offer nothing from it
            found += [entry["path"] for entry in entries if entry["kind"] == "dir"]
    return sorted(set(found))[:PACKAGE_CHOICES]


@csp_update({"script-src": WASM})
@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    datacenters = list(Datacenter.objects.usable_by(request.user))
    registries = list(RegistrySecret.objects.filter(owner_id=request.user.pk).values_list("name", flat=True))
    choices = {
        "datacenters": [dc.name for dc in datacenters], "registries": registries,
        "priorities": priority_names(request.user),
    }
    dry_run_result = None
    if request.method == "POST":
        form = SubmitForm(request.POST, **choices)
        if form.is_valid():
            payload = form.payload()
            if form.is_valid():  # the env lines parsed
                try:
                    # The API's own submit: the spec serializer, then check, then dry_run or submit.
                    done = services.submit_request(request.user, payload, check_only="dry_run" in request.POST)  # type: ignore[arg-type]
                    job, checked = done.job, done.checked
                    if checked is not None and "dry_run" in request.POST:
                        dry_run_result = {"job": job, "cpu": checked.cpu, "memory": checked.memory, "gpu": checked.gpu}
                    else:
                        messages.success(request, f"Job {job.name} submitted.")
                        return redirect("job-detail", ref=job.uid)
                except services.InvalidSpec as exc:
                    form.add_api_errors(exc.problems)
                except DomainError as exc:
                    form.add_api_errors({exc.field: exc.messages} if exc.field else exc.messages)
        status = 400 if form.errors else 200
    else:
        initial: dict[str, Any] = {}
        clone = request.GET.get("clone")
        if clone:
            source = _job_for(request, clone[:48])
            # Env values may be the owner's tokens: an operator cloning another's job gets the names only.
            initial = initial_from_spec(source.spec, with_env_values=source.owner_id == request.user.pk)
            initial.update(jobname=source.name, datacenter=source.datacenter.name)
        form = SubmitForm(initial=initial, **choices)
        status = 200
    context = {
        "form": form,
        "folders": _package_folders(request, datacenters),
        "homes": [paths.home_logical(request.user, dc) for dc in datacenters],
        "dry_run": dry_run_result,
        "uploads_api": reverse("files-uploads"),
    }
    return render(request, "jobs/new.html", context, status=status)


# --- the queue ---------------------------------------------------------------------------------------

QUEUE_VERBS = {"hold": (services.hold, "held"), "release": (services.release, "released"),
               "front": (services.front, "moved to the front of its priority")}  # fmt: skip


def times(count: int) -> str:
    """once, twice, 3 times."""
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def _place_context(job: Job) -> dict[str, Any]:
    """A waiting job's place in its queue (jobs.scheduling.queue's), for the job page's queue line."""
    waiting = queue.is_waiting(job)
    return {"waiting": waiting, "place": queue.place(job) if waiting else queue.NOWHERE}


@login_required
def job_place(request: HttpRequest, ref: str) -> HttpResponse:
    """The job page's queue line, polled while the job waits (an empty line, no longer polled, after)."""
    job = _job_for(request, ref)
    return render(request, "jobs/_place.html", {"job": job, **_place_context(job)})


def _queue_rows(waiting: queue.Queue) -> list[dict[str, Any]]:
    # How long each waited, for the `elapsed` filter; held rows are marked for the operators' buttons.
    return [{**row, "waited_for": timedelta(seconds=row["waited"]), "held": row["reason"] == "Held"}
            for row in waiting.rows]  # fmt: skip


@login_required
def queue_page(request: HttpRequest) -> HttpResponse:
    """One datacenter's waiting jobs in admission order (jobs.scheduling.queue: others' jobs unnamed unless staff)."""
    names = list(Datacenter.objects.usable_by(request.user).order_by("name").values_list("name", flat=True))
    chosen = (request.GET.get("datacenter") or (names[0] if names else ""))[:MAX_DATACENTER]
    context: dict[str, Any] = {"datacenters": names, "chosen": chosen, "rows": [], "waiting": None, "error": ""}
    status = 200
    if chosen:
        try:
            waiting = queue.queue(usable_datacenter(request.user, chosen), request.user)
            context.update(waiting=waiting, rows=_queue_rows(waiting))
        except DomainError as exc:
            context["error"], status = exc.message, 400
    template = "jobs/_queue.html" if request.headers.get("HX-Request") else "jobs/queue.html"
    return render(request, template, context, status=status)


@login_required
@require_POST
def queue_action(request: HttpRequest, ref: str, verb: str) -> HttpResponse:
    """Staff: hold, release or move a waiting job to the front; a job no longer waiting is a message, not an error."""
    if not request.user.is_staff:
        raise PermissionDenied("only operators may change the queue")
    if verb not in QUEUE_VERBS:
        raise Http404("no such action")
    act, done = QUEUE_VERBS[verb]
    back = reverse("queue")
    try:
        job = _job_for(request, ref[:MAX_REF])
    except Http404:
        messages.error(request, f"Job {ref[:MAX_REF]} is gone (deleted meanwhile).")
        return redirect(back)
    try:
        act(job)
        messages.success(request, f"Job {job.name} of {job.owner.username} {done}.")
    except DomainError as exc:
        messages.error(request, exc.message[:1].upper() + exc.message[1:] + ".")
    return redirect(f"{back}?{urlencode({'datacenter': job.datacenter.name})}")


USAGE_JOBS_SHOWN = 50  # the runs that held the most; the rest are in the CSV (`group_by=job`)


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    """What was held and used in the last 30 days, by UTC day (charted) and by run (jobs.scheduling.accounting:
    operators see everyone's)."""
    span = accounting.window(None, None)
    rows, by_job = accounting.by_day_and_job(accounting.scope(request.user), span)
    runs = sorted(by_job, key=lambda row: (-row["cpu_core_hours"], row["key"]))
    columns = {"days": "key", "asked": "cpu_core_hours", "used": "cpu_core_hours_used", "gpu": "gpu_hours"}
    chart = {name: [row[column] for row in rows] for name, column in columns.items()}
    window = [span.since.timestamp(), span.until.timestamp()]  # the x axis spans the whole window, not its days
    chart_json = json.dumps({**chart, "window": window})
    context = {"rows": rows, "span": span, "days": accounting.DEFAULT_DAYS, "chart": chart_json,
               "runs": runs[:USAGE_JOBS_SHOWN], "runs_hidden": max(0, len(runs) - USAGE_JOBS_SHOWN)}  # fmt: skip
    return render(request, "jobs/usage.html", context)
