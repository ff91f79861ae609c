"""Every write to image builds goes through here: check (no lock), create (a short transaction), cancel.

The rules of a build request, each refused with a 400 naming its field:
- datacenter: one the user may use, run by the kubernetes engine, with a `builder_image`;
- package: a folder in the user's own home on that datacenter (symlinks resolved inside the home only);
- registry: one of the user's own registry secrets;
- image: a valid reference on that secret's registry host, under the secret's path when it has one
  (contract.imageref.push_problem); the registry's own access control decides the rest;
- base_image: a valid reference (default: the datacenter's cpu_image); whether it exists, the build finds out.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from paddlecloud.contract.imageref import BadReference, parse_image, push_problem

from core.errors import Conflict, Invalid
from datacenters.models import Datacenter, rules_for
from images.models import ACTIVE_BUILD_STATES, BuildState, ImageBuild
from images.states import transition
from images.tasks import start_build, stop_build
from jobs.files.layout import package_place
from jobs.services import choose_datacenter
from registry.models import RegistrySecret
from storage import paths

MAX_ACTIVE_BUILDS = 5  # per user: queued or building at once
_SUFFIX = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class CheckedBuild:
    """A build request that passed every check needing no lock."""

    user: User
    datacenter: Datacenter
    package: str  # logical, normalized
    base_image: str
    image: str
    registry: str


def _package(user: User, datacenter: Datacenter, text: str) -> str:
    resolved = package_place(datacenter, user, text, write=False)
    if resolved.area != paths.HOME or resolved.owner is None:
        raise Invalid(f"must be a folder in your home, {paths.home_logical(user, datacenter)}/...", "package")
    if not resolved.real.is_dir():
        raise Invalid(f"{text!r} is not a folder (upload the package first: `paddlectl file cp`)", "package")
    return resolved.logical


def _reference(text: str, field: str) -> Any:
    try:
        return parse_image(text)
    except BadReference as exc:
        raise Invalid(f"{text[:100]!r} is not an image reference: {exc}", field) from None


def _builder_datacenter(user: User, name: str | None) -> Datacenter:
    datacenter = choose_datacenter(user, name)
    rules_for(datacenter.engine).check_builds(datacenter)
    return datacenter


def check(user: User, data: dict[str, Any]) -> CheckedBuild:
    """Every check of a build request that needs no lock (data: what BuildRequestSerializer validated)."""
    datacenter = _builder_datacenter(user, data.get("datacenter") or None)
    package = _package(user, datacenter, data["package"])
    secret = RegistrySecret.objects.filter(owner=user, name=data["registry"]).first()
    if secret is None:
        raise Invalid(
            f"you have no registry secret named {data['registry'][:63]!r} (see `paddlectl get registry`)", "registry"
        )
    image = _reference(data["image"], "image")
    problem = push_problem(image, secret.server)
    if problem:
        raise Invalid(f"{data['image'][:100]!r} {problem}", "image")
    base_image = data.get("base_image") or datacenter.cpu_image
    _reference(base_image, "base_image")
    return CheckedBuild(user, datacenter, package, base_image, data["image"], secret.name)


def _uid() -> str:
    return "build-" + "".join(secrets.choice(_SUFFIX) for _ in range(8))


def unsaved(checked: CheckedBuild) -> ImageBuild:
    """The build a dry run answers with: what create would write."""
    return ImageBuild(
        owner=checked.user,
        datacenter=checked.datacenter,
        package=checked.package,
        base_image=checked.base_image,
        image=checked.image,
        registry=checked.registry,
    )


def create(checked: CheckedBuild) -> ImageBuild:
    """Write the build (at most MAX_ACTIVE_BUILDS active per user); start_build runs on commit."""
    with transaction.atomic():
        # Serialize this user's requests so two at once cannot both take the last slot.
        User.objects.select_for_update().filter(pk=checked.user.pk).first()
        active = ImageBuild.objects.filter(owner=checked.user, state__in=ACTIVE_BUILD_STATES).count()
        if active >= MAX_ACTIVE_BUILDS:
            raise Conflict(
                f"you have {active} builds queued or building (the limit is {MAX_ACTIVE_BUILDS}); "
                "wait for one or cancel it"
            )
        build = unsaved(checked)
        build.uid = _uid()
        build.save()
        transaction.on_commit(lambda: start_build.delay(build.pk))
    return build


def cancel(build: ImageBuild) -> bool:
    """Cancel a queued or running build; stop_build deletes the builder (after archiving its log)."""
    with transaction.atomic():
        cancelled = transition(build.pk, BuildState.CANCELLED, message="cancelled by request")
    if cancelled or (not build.is_active and not build.released):
        transaction.on_commit(lambda: stop_build.delay(build.pk))
    build.refresh_from_db()
    return cancelled
