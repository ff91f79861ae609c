"""ImageBuild: one in-cluster build of a runtime image (a state machine row, like a job)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from paddlecloud.contract import states


class BuildState(models.TextChoices):  # the names are the client's too (paddlecloud.contract.states)
    QUEUED = states.QUEUED  # row written, start_build enqueued on commit
    BUILDING = states.BUILDING  # a worker claimed it; the builder Job is (being) created and runs
    SUCCEEDED = states.SUCCEEDED  # pushed; `digest` is what the registry stored
    FAILED = states.FAILED  # `message` is the builder's last error line
    CANCELLED = states.CANCELLED  # the owner or an operator cancelled it


ACTIVE_BUILD_STATES = tuple(BuildState(state) for state in states.ACTIVE_BUILD_STATES)
TERMINAL_BUILD_STATES = tuple(BuildState(state) for state in states.TERMINAL_BUILD_STATES)


class BuildQuerySet(models.QuerySet["ImageBuild"]):
    def visible_to(self, user: Any, everyone: bool = False) -> BuildQuerySet:
        """The one rule for whose builds a user sees: their own; an operator, with `everyone`, all."""
        if getattr(user, "is_staff", False) and everyone:
            return self
        return self.filter(owner_id=user.pk)


class ImageBuild(models.Model):
    uid = models.CharField(max_length=20, unique=True, help_text="build-<suffix>: the build's id and Job name.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="image_builds")
    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.PROTECT, related_name="image_builds")
    package = models.CharField(max_length=4096, help_text="The package folder: /pfs/<dc>/home/<user>/...")
    base_image = models.CharField(max_length=300)
    image = models.CharField(max_length=300, help_text="Where the result is pushed.")
    registry = models.CharField(max_length=63, help_text="The owner's registry secret the builder pushes with.")

    state = models.CharField(max_length=20, choices=BuildState.choices, default=BuildState.QUEUED, db_index=True)
    message = models.TextField(blank=True, default="")
    digest = models.CharField(max_length=200, blank=True, default="", help_text="sha256:... of the pushed image.")

    # Engine-private: where the builder Job runs, and how far its end was handled.
    namespace = models.CharField(max_length=63, blank=True, default="")
    k8s_job = models.CharField(max_length=63, blank=True, default="", help_text="Set once the Job exists.")
    log = models.TextField(blank=True, default="", help_text="The builder's log, archived when it ended.")
    log_archived = models.BooleanField(default=False)
    log_dropped = models.BigIntegerField(default=0, help_text="Bytes at the start of a long log not kept in `log`.")
    released = models.BooleanField(default=False, help_text="The builder's objects were deleted.")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = BuildQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="build_owner_newest"),
            models.Index(fields=["datacenter", "state"], name="build_datacenter_state"),
        ]

    def __str__(self) -> str:
        return f"{self.uid} of {self.owner_id}: {self.state}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_BUILD_STATES
