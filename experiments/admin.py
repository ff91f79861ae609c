"""Admin for experiments: each with its trials, read-only (the owner's API and CLI change them)."""

from __future__ import annotations

from django.contrib import admin

from experiments.models import Experiment, Trial


class TrialInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Trial
    extra = 0
    can_delete = False
    readonly_fields = ["index", "params", "job", "state", "message", "best", "last", "steps"]
    max_num = 0


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["uid", "owner", "datacenter", "state", "created_at", "finished_at"]
    list_filter = ["state", "datacenter"]
    search_fields = ["uid", "name", "owner__username"]
    readonly_fields = ["uid", "name", "owner", "datacenter", "template", "sweep", "state", "message", "created_at",
                       "finished_at"]  # fmt: skip
    inlines = [TrialInline]
