"""Admin for datacenters (the operators' console) and per-user quota overrides."""

from __future__ import annotations

from django.contrib import admin

from portal.datacenters.models import Datacenter, Quota
from portal.secret_widgets import WriteOnlySecretField, WriteOnlySecretsForm


class DatacenterForm(WriteOnlySecretsForm):
    secret_fields = ("kubeconfig",)
    kubeconfig = WriteOnlySecretField(textarea=True, help_text="Paste a kubeconfig; it is stored encrypted.")

    class Meta:
        model = Datacenter
        fields = "__all__"


class QuotaInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Quota
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Datacenter)
class DatacenterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = DatacenterForm
    list_display = ["name", "engine", "enabled", "storage_kind", "storage_root", "all_users", "pending_timeout"]
    list_filter = ["engine", "enabled", "storage_kind", "all_users"]
    search_fields = ["name", "description"]
    filter_horizontal = ["allowed_users"]
    inlines = [QuotaInline]
    readonly_fields = ["local_host"]
    fieldsets = [
        (None, {"fields": ["name", "description", "engine", "enabled"]}),
        ("Who may use it", {"fields": ["all_users", "allowed_users"]}),
        (
            "Cluster",
            {
                "fields": ["in_cluster", "kubeconfig", "kube_context", "namespace_prefix"],
                "description": "For the kubernetes engine. The local engine runs user code as the "
                "worker's OS user: enable it only for trusted users.",
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
        ("Jobs", {"fields": ["cpu_image", "gpu_image", "pending_timeout", "finished_ttl"]}),
        ("Local engine: sandbox and limits", {"fields": ["run_without_sandbox", "local_host"]}),
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
    ]

    @admin.display(description="this host")
    def local_host(self, obj: Datacenter) -> str:
        from jobs.engines.local_world import host_report

        return host_report()


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "datacenter", "cpu", "memory", "gpu", "jobs", "storage", "storage_files", "updated_at"]
    list_filter = ["datacenter"]
    search_fields = ["user__username", "datacenter__name"]
    autocomplete_fields = ["user"]
