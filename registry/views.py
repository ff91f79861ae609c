"""Registry secret pages: list (never the password), add with the API's serializer, delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from registry.api import RegistrySecretSerializer
from registry.models import RegistrySecret

FIELDS = ("name", "server", "username", "password")


@login_required
def registry_list(request: HttpRequest) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    values = {"name": "", "server": "", "username": ""}
    status = 200
    if request.method == "POST":
        data = {field: request.POST.get(field, "") for field in FIELDS}
        serializer = RegistrySecretSerializer(data=data)  # the API's rules and messages
        if serializer.is_valid():
            try:
                with transaction.atomic():
                    serializer.save(owner=request.user)
            except IntegrityError:
                errors = {"name": [f"you already have a registry secret named {data['name']!r}"]}
            else:
                messages.success(request, f"Registry secret {data['name']} added.")
                return redirect("registries")
        else:
            errors = {key: [str(v) for v in value] for key, value in serializer.errors.items()}
        values = {key: data[key][:255] for key in values}  # never the password back
        status = 400
    secrets = RegistrySecret.objects.filter(owner_id=request.user.pk).order_by("name")
    return render(
        request, "registry/list.html", {"secrets": secrets, "errors": errors, "values": values}, status=status
    )


@login_required
@require_POST
def registry_delete(request: HttpRequest, name: str) -> HttpResponse:
    deleted, _ = RegistrySecret.objects.filter(owner_id=request.user.pk, name=name).delete()
    if not deleted:
        raise Http404("no such registry secret")
    messages.success(request, f"Registry secret {name} deleted.")
    return redirect("registries")
