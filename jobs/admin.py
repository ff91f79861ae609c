"""Admin for jobs: each job with its workers, timeline, spec and log links; queue verbs; the usage ledger as CSV."""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from core.errors import Conflict
from jobs import services
from jobs.models import GpuAssignment, Job, JobEvent, PriorityClass, Runtime, SchedulingPolicy, UsageRecord, Worker
from jobs.scheduling import priorities, strategies
from jobs.web import admin_display


class WorkerInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Worker
    extra = 0
    can_delete = False
    readonly_fields = [
        "role", "index", "state", "host", "pid", "started_at", "restarts", "exit_code", "message", "usage",
    ]  # fmt: skip
    exclude = ["usage_history"]  # up to 360 points: the job page charts them

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class EventInline(admin.TabularInline):  # type: ignore[type-arg]
    """The job's timeline (jobs.events), read-only: events are the domain's record, never edited."""

    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["time", "kind", "worker", "message"]
    ordering = ["time", "id"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


JSON_FIELDS = ("spec", "engine_data")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "page", "owner", "datacenter", "state", "reason", "exit_code", "created_at", "finished_at"]
    list_filter = ["state", "reason", "datacenter"]
    search_fields = ["name", "uid", "owner__username"]
    # The JSON fields are shown as tables (jobs/web/admin_display.py), not as raw JSON; everything is read-only.
    readonly_fields = ["links", *(f.name for f in Job._meta.fields if f.name not in JSON_FIELDS), "spec_table",
                       "engine_data_table"]
    fields = tuple(readonly_fields)
    inlines = [WorkerInline, EventInline]
    actions = ["kill", "hold", "release", "front"]

    @admin.display(description="uid (job page)", ordering="uid")
    def page(self, job: Job) -> str:
        return format_html('<a href="{}">{}</a>', reverse("job-detail", args=[job.uid]), job.uid)

    @admin.display(description="Pages")
    def links(self, job: Job) -> str:
        return admin_display.links(job)

    @admin.display(description="Spec")
    def spec_table(self, job: Job) -> str:
        return admin_display.json_table(job.spec)

    @admin.display(description="Engine data")
    def engine_data_table(self, job: Job) -> str:
        return admin_display.json_table(job.engine_data)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are submitted through the API, which validates and checks quota

    @admin.action(description="Kill selected jobs")
    def kill(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        killed = sum(1 for job in queryset if services.kill(job))
        self.message_user(request, f"Killed {killed} job(s).", messages.SUCCESS)

    def _queue_verb(self, request: HttpRequest, queryset: QuerySet[Job], verb: Callable[[Job], Job], done: str) -> None:
        """One queue verb (jobs.services) on each selected job; those not waiting in the queue are counted apart."""
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
        self._queue_verb(request, queryset, services.hold, "Held")

    @admin.action(description="Release selected held jobs")
    def release(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._queue_verb(request, queryset, services.release, "Released")

    @admin.action(description="Move selected queued jobs to the front of their priority")
    def front(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._queue_verb(request, queryset, services.front, "Moved to the front")


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


LEDGER_COLUMNS = ("owner", "datacenter", "job_uid", "job_name", "worker", "cpu", "memory", "gpu", "started_at",
                  "ended_at", "seconds")  # fmt: skip


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The ledger, one row per worker of a released job; read-only (the scheduler's fair share reads it).

    Sums per user, team or day over a window: GET /api/v1/usage (and `paddlectl usage`); here, the rows.
    """

    list_display = ["job_uid", "worker", "owner", "datacenter", "cpu", "memory", "gpu", "started_at", "ended_at"]
    list_filter = ["datacenter", "owner", "ended_at"]
    search_fields = ["job_uid", "job_name", "owner__username"]
    date_hierarchy = "ended_at"
    readonly_fields = [f.name for f in UsageRecord._meta.fields]
    actions = ["download_csv"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the ledger is the record of what was used: nobody edits history

    @admin.action(description="Download CSV of the selected records")
    def download_csv(self, request: HttpRequest, queryset: QuerySet[UsageRecord]) -> HttpResponse:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage-records.csv"'
        writer = csv.writer(response, lineterminator="\n")
        writer.writerow(LEDGER_COLUMNS)
        rows = queryset.select_related("owner", "datacenter").order_by("ended_at", "job_uid", "worker")
        for record in rows.iterator(chunk_size=2000):
            writer.writerow([
                record.owner.username, record.datacenter.name, record.job_uid, record.job_name, record.worker,
                record.cpu, record.memory, record.gpu, record.started_at.isoformat(), record.ended_at.isoformat(),
                f"{record.seconds:.3f}",
            ])  # fmt: skip
        return response


def _choices(registry: Mapping[str, object]) -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(registry)]


class SchedulingPolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    """The strategies by name from their registries, and the settings checked by the strategies chosen."""

    order = forms.ChoiceField(choices=_choices(strategies.ORDERS))
    backfill = forms.ChoiceField(choices=_choices(strategies.BACKFILLS))
    victims = forms.ChoiceField(choices=_choices(strategies.VICTIMS))

    class Meta:
        model = SchedulingPolicy
        fields = ["datacenter", "order", "backfill", "victims", "settings"]

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if not self.errors:
            try:
                strategies.build(data["order"], data["backfill"], data["victims"], data.get("settings"))
            except strategies.StrategyError as exc:
                self.add_error(exc.field, exc.message)
        return data


@admin.register(SchedulingPolicy)
class SchedulingPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """How each datacenter's portal scheduler decides (jobs.scheduling.strategies: each rule and its settings)."""

    form = SchedulingPolicyForm
    list_display = ["datacenter", "order", "backfill", "victims", "settings"]


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The priority classes users submit with (jobs.scheduling.priorities): who may use each, and its value.

    A value is read at submit and kept on the job, so a change orders the jobs submitted after it. The default
    class (`normal`) is what a submit without one gets: it can be edited but not renamed or deleted."""

    list_display = ["name", "value", "open_to_all", "may_opt_out", "description"]
    search_fields = ["name", "description"]
    # A plain multiple select: filter_horizontal and autocomplete (select2) both leave inputs axe finds unlabelled.

    def get_readonly_fields(self, request: HttpRequest, obj: PriorityClass | None = None) -> list[str]:
        return ["name"] if obj is not None and obj.name == priorities.DEFAULT else []

    def has_delete_permission(self, request: HttpRequest, obj: PriorityClass | None = None) -> bool:
        if obj is not None and obj.name == priorities.DEFAULT:
            return False
        return super().has_delete_permission(request, obj)
