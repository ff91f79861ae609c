"""Admin for jobs: operators see every job, its workers, and can kill jobs and hold, release or front queued ones."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from core.errors import Conflict
from jobs import queue, services
from jobs.models import GpuAssignment, Job, Runtime, Worker


class WorkerInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Worker
    extra = 0
    can_delete = False
    readonly_fields = ["role", "index", "state", "host", "pid", "started_at", "restarts", "exit_code", "message"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "page", "owner", "datacenter", "state", "reason", "exit_code", "created_at", "finished_at"]
    list_filter = ["state", "reason", "datacenter"]
    search_fields = ["name", "uid", "owner__username"]
    readonly_fields = [f.name for f in Job._meta.fields]
    inlines = [WorkerInline]
    actions = ["kill", "hold", "release", "front"]

    @admin.display(description="uid (job page)", ordering="uid")
    def page(self, job: Job) -> str:
        return format_html('<a href="{}">{}</a>', reverse("job-detail", args=[job.uid]), job.uid)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are submitted through the API, which validates and checks quota

    @admin.action(description="Kill selected jobs")
    def kill(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        killed = sum(1 for job in queryset if services.kill(job))
        self.message_user(request, f"Killed {killed} job(s).", messages.SUCCESS)

    def _queue_verb(self, request: HttpRequest, queryset: QuerySet[Job], verb: Callable[[Job], Job], done: str) -> None:
        """One of jobs/queue.py's verbs on each selected job; those not waiting in the queue are counted apart."""
        changed = skipped = 0
        for job in queryset:
            try:
                verb(job)
                changed += 1
            except Conflict:
                skipped += 1
        note = f" {skipped} not waiting in the queue were left as they are." if skipped else ""
        self.message_user(request, f"{done} {changed} job(s).{note}", messages.WARNING if skipped else messages.SUCCESS)

    @admin.action(description="Hold selected queued jobs")
    def hold(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._queue_verb(request, queryset, queue.hold, "Held")

    @admin.action(description="Release selected held jobs")
    def release(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._queue_verb(request, queryset, queue.release, "Released")

    @admin.action(description="Move selected queued jobs to the front of their priority")
    def front(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._queue_verb(request, queryset, queue.front, "Moved to the front")


@admin.register(Runtime)
class RuntimeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Runtimes of local datacenters: users pick one with `-image NAME`; built on a host at first use."""

    list_display = ["name", "datacenter", "description", "created_at"]
    list_filter = ["datacenter"]
    search_fields = ["name", "description"]


@admin.register(GpuAssignment)
class GpuAssignmentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Which job holds which host GPU right now (rows go when the job's processes are gone)."""

    list_display = ["datacenter", "gpu", "job", "trainer"]
    list_filter = ["datacenter"]
    readonly_fields = ["datacenter", "gpu", "job", "trainer"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
