"""Pages: home dashboard, signup (switchable, optional approval) and the profile with the API token."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.accounts.services import current_token, regenerate_token
from portal.datacenters import quota
from portal.datacenters.models import Datacenter
from portal.registry.models import RegistrySecret


class SignupForm(UserCreationForm):  # type: ignore[type-arg]
    email = forms.EmailField(required=True)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.PADDLECLOUD_SIGNUP_ENABLED:
        raise Http404("signup is switched off; ask an operator for an account")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save(commit=False)
        user.is_active = not settings.PADDLECLOUD_SIGNUP_REQUIRES_APPROVAL
        user.save()
        if user.is_active:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("home")
        messages.info(request, "Account created. An operator must approve it before you can log in.")
        return redirect("login")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
def home(request: HttpRequest) -> HttpResponse:
    from jobs.models import Job  # the dashboard shows jobs; accounts has no other tie to them

    datacenters = list(Datacenter.objects.usable_by(request.user))
    recent = Job.objects.filter(owner_id=request.user.pk).select_related("datacenter").order_by("-created_at")[:8]
    return render(
        request, "home.html", {"quotas": [quota.report(request.user, dc) for dc in datacenters], "recent_jobs": recent}
    )


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # guaranteed by @login_required
    return request.user


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    token = current_token(_user(request))
    registries = RegistrySecret.objects.filter(owner=_user(request)).order_by("name")
    return render(
        request,
        "accounts/profile.html",
        {"token": token, "registries": registries, "public_url": settings.PADDLECLOUD_PUBLIC_URL},
    )


@login_required
@require_POST
def regenerate(request: HttpRequest) -> HttpResponse:
    regenerate_token(_user(request))
    messages.success(request, "A new API token was issued; the old ones no longer work.")
    return redirect("profile")
