"""Job pages: the user's jobs, and one job with its workers and live logs (polled by cursor)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from jobs import services
from jobs.models import Job


def _job_for(request: HttpRequest, uid: str) -> Job:
    """One run by its uid: its owner's, and an operator's as with the API's ?all=1 (the admin links here)."""
    jobs = Job.objects.select_related("owner", "datacenter").visible_to(request.user, everyone=True)
    job = jobs.filter(uid=uid).first()
    if job is None:
        raise Http404("job not found")
    return job


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = Job.objects.visible_to(request.user).select_related("datacenter").order_by("-created_at")
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    return render(request, "jobs/list.html", {"page": page})


@login_required
def job_detail(request: HttpRequest, uid: str) -> HttpResponse:
    job = _job_for(request, uid)
    workers = job.workers.order_by("role", "index")
    return render(request, "jobs/detail.html", {"job": job, "workers": workers, "worker_names": job.worker_names})


@login_required
@require_POST
def job_kill(request: HttpRequest, uid: str) -> HttpResponse:
    job = _job_for(request, uid)
    if services.kill(job):
        messages.success(request, f"Job {job.name} killed; its name is free again.")
    else:
        messages.info(request, f"Job {job.name} had already ended ({job.state}).")
    return redirect("job-detail", uid=job.uid)
