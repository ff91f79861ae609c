"""File browser pages: list a folder of the PFS home or public area, mkdir, delete; uploads go through the API.

What a folder shows and who may write it come from storage.services, as the API's listing does.
"""

from __future__ import annotations

from typing import Any

from csp.decorators import csp_update
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from core.csp import WASM
from core.errors import DomainError, Forbidden, NotFound
from datacenters import quota
from datacenters.models import Datacenter
from storage import files, paths, services

PAGE_SIZE = 200
MAX_PATH = paths.MAX_PATH_BYTES


def _problem(error: DomainError) -> str:
    return f"{error.field}: {error.message}" if error.field else error.message


def _browse(path: str) -> HttpResponse:
    return redirect(f"{reverse('file-browser')}?{urlencode({'path': path})}")


@csp_update({"script-src": WASM})
@login_required
def browser(request: HttpRequest) -> HttpResponse:
    datacenters = list(Datacenter.objects.usable_by(request.user))
    if not datacenters:
        return render(request, "storage/browser.html", {"datacenters": []})
    path = request.GET.get("path", "")[:MAX_PATH] or paths.home_logical(request.user, datacenters[0])
    try:
        folder = services.open_folder(request.user, path)
        page: Page[dict[str, Any]] = Paginator(folder.listing, PAGE_SIZE).get_page(  # type: ignore[arg-type]
            request.GET.get("page")
        )
    except (Forbidden, NotFound):
        # Another user's home looks like nothing at all (a 404), as their jobs do.
        raise Http404("no such folder") from None
    except DomainError as exc:
        messages.error(request, _problem(exc))
        return render(request, "storage/browser.html", {"datacenters": datacenters, "path": path}, status=400)
    target = folder.target
    logical = target.logical
    root = logical[: len(logical) - len("/".join(target.parts))].rstrip("/") if target.parts else logical
    crumbs = [{"name": root.removeprefix("/pfs/"), "path": root}]  # the area's root: nothing above is browsable
    for i, part in enumerate(target.parts):
        crumbs.append({"name": part, "path": "/".join([root, *target.parts[: i + 1]])})
    report = quota.report(request.user, target.datacenter)
    context: dict[str, Any] = {
        "datacenters": datacenters,
        "areas": [
            (paths.home_logical(request.user, dc), f"/pfs/{dc.name}/{paths.PUBLIC}", dc.name) for dc in datacenters
        ],
        "path": logical,
        "parent": logical.rsplit("/", 1)[0] if not target.is_area_root else "",
        "crumbs": crumbs,
        "page": page,
        "writable": folder.writable,
        "storage": report,
        "uploads_api": reverse("files-uploads"),
        "download_api": reverse("files-download"),
    }
    return render(request, "storage/browser.html", context)


@login_required
@require_POST
def make_folder(request: HttpRequest) -> HttpResponse:
    parent = request.POST.get("parent", "")[:MAX_PATH]
    name = request.POST.get("name", "")[:MAX_PATH]
    if not name or "/" in name:
        messages.error(request, "name: one folder name, without '/'")
        return _browse(parent)
    try:
        files.mkdir(request.user, f"{parent.rstrip('/')}/{name}", parents=False)
        messages.success(request, f"Folder {name} created.")
    except DomainError as exc:
        messages.error(request, _problem(exc))
    return _browse(parent)


@login_required
@require_POST
def remove(request: HttpRequest) -> HttpResponse:
    path = request.POST.get("path", "")[:MAX_PATH]
    parent = path.rstrip("/").rsplit("/", 1)[0]
    try:
        removed = files.remove(request.user, path, recursive=True)
        messages.success(request, f"Deleted {removed.path} ({removed.entries} entries).")
    except DomainError as exc:
        messages.error(request, _problem(exc))
    return _browse(parent)
