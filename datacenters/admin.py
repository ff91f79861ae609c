"""Admin for datacenters (the operators' console) and per-user quota overrides."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.secret_widgets import WriteOnlySecretField, WriteOnlySecretsForm
from datacenters.models import Datacenter, Engine, Quota, TeamQuota, rules_for


class DatacenterForm(WriteOnlySecretsForm):
    secret_fields = ("kubeconfig",)
    kubeconfig = WriteOnlySecretField(textarea=True, help_text="Paste a kubeconfig; it is stored encrypted.")

    class Meta:
        model = Datacenter
        fields = "__all__"


# Stacked, not tabular: a quota has a dozen fields, and a table of them was 2,000 px wide with inputs a screen
# reader could not name (their labels were column headers far above). Collapsed: most datacenters have few.
class QuotaInline(admin.StackedInline):  # type: ignore[type-arg]
    model = Quota
    extra = 0
    autocomplete_fields = ["user"]
    classes = ["collapse"]


class TeamQuotaInline(admin.StackedInline):  # type: ignore[type-arg]
    model = TeamQuota
    extra = 0
    classes = ["collapse"]


@admin.register(Datacenter)
class DatacenterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = DatacenterForm
    list_display = ["name", "engine", "enabled", "storage_kind", "storage_root", "all_users", "pending_timeout"]
    list_filter = ["engine", "enabled", "storage_kind", "all_users"]
    search_fields = ["name", "description"]
    inlines = [QuotaInline, TeamQuotaInline]
    # allowed_users: a plain multiple select (labelled); filter_horizontal's and select2's inputs fail axe.
    readonly_fields = ["local_host"]
    actions = ["detect_gpus"]
    fieldsets = [
        (None, {"fields": ["name", "description", "engine", "enabled"]}),
        ("Who may use it", {"fields": ["all_users", "allowed_users"]}),
        (
            "Cluster",
            {
                "fields": ["in_cluster", "kubeconfig", "kube_context", "namespace_prefix", "admission"],
                "description": "For the kubernetes engine.",
            },
        ),
        (
            "Storage",
            {
                "fields": [
                    "storage_kind",
                    "storage_root",
                    "public_path",
                    "host_path",
                    "nfs_server",
                    "nfs_path",
                    "cephfs_monitors",
                    "cephfs_user",
                    "cephfs_secret_name",
                    "cephfs_path",
                    "pvc_name",
                ]
            },
        ),
        (
            "Local engine",
            {
                "fields": ["run_without_sandbox", "local_host", "gpus"],
                "description": "Jobs run in a bubblewrap sandbox as an unprivileged user; 'run without "
                "sandbox' (trusted users only) lets them run where the host cannot make one. "
                "GPUs: the host GPUs jobs may be given (indexes of `nvidia-smi -L`); "
                "the action 'Detect GPUs' fills them from this host. Runtimes (what `-image NAME` "
                "picks) are under Training jobs -> Runtimes.",
            },
        ),
        ("Jobs", {"fields": ["cpu_image", "gpu_image", "pending_timeout", "stall_timeout", "finished_ttl"]}),
        (
            "Isolation",
            {
                "fields": [
                    "job_egress", "wait_for_isolation", "kubelet_port", "job_pids_limit", "user_pids_limit",
                    "job_log_limit",
                ],
                "description": "What every job may use of what the host or cluster shares (the docs: Isolation).",
            },
        ),
        (
            "Scheduler",
            {
                "fields": [
                    "capacity_cpu",
                    "capacity_memory",
                    "capacity_gpu",
                    "max_queued_jobs",
                    "fair_share_half_life",
                    "reserve_after",
                    "preemption_delay",
                    "preemption_grace",
                    "elastic_grow_after",
                ],
                "description": "What all running jobs together may hold (blank: the host's, on the local engine), "
                "and how the queue shares it out: the docs: The scheduler. Teams' quotas are below.",
            },
        ),
        (
            "Image builds",
            {
                "fields": ["builder_image", "builder_ca"],
                "description": "For in-cluster builds of runtime images (kubernetes engine): POST /api/v1/images.",
            },
        ),
        (
            "Default quota per user",
            {
                "fields": [
                    "default_cpu",
                    "default_memory",
                    "default_gpu",
                    "default_jobs",
                    "default_storage",
                    "default_storage_files",
                ]
            },
        ),
        (
            "Quota of an account made by signup",
            {
                "fields": ["new_user_cpu", "new_user_memory", "new_user_gpu", "new_user_jobs", "new_user_storage"],
                "description": "Written into the quota of each account made by signup (PADDLECLOUD_SIGNUP), here and "
                "in every datacenter made later; raise a trusted user's in their quota row. Blank: the default's.",
            },
        ),
    ]

    @admin.display(description="this host")
    def local_host(self, obj: Datacenter) -> str:
        return rules_for(Engine.LOCAL).host_report()

    @admin.action(description="Detect GPUs (nvidia-smi -L on this host)")
    def detect_gpus(self, request: HttpRequest, queryset: QuerySet[Datacenter]) -> None:
        found = rules_for(Engine.LOCAL).detect_gpus()
        updated = queryset.filter(engine=Engine.LOCAL).update(gpus=found)
        listed = ", ".join(found) or "none"
        self.message_user(
            request, f"{len(found)} GPU(s) found ({listed}); {updated} local datacenter(s) updated.", messages.SUCCESS
        )

    def save_model(self, request: HttpRequest, obj: Datacenter, form: Any, change: bool) -> None:
        if not change:
            rules_for(obj.engine).prepare_new(obj)
        super().save_model(request, obj, form, change)


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "datacenter", "cpu", "memory", "gpu", "jobs", "weight", "storage", "storage_files",
                    "updated_at"]  # fmt: skip
    list_filter = ["datacenter"]
    search_fields = ["user__username", "datacenter__name"]
    autocomplete_fields = ["user"]


@admin.register(TeamQuota)
class TeamQuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["group", "datacenter", "cpu", "memory", "gpu", "may_borrow", "weight"]
    list_filter = ["datacenter", "may_borrow"]
    search_fields = ["group__name", "datacenter__name"]
