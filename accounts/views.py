"""Pages: the throttled logins, signup (open, approval or closed; throttled), the profile with the API token."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts import throttle
from accounts.services import current_token, regenerate_token
from datacenters import newcomers
from datacenters.models import Datacenter
from registry.models import RegistrySecret


class ThrottledLogin(AuthenticationForm):
    """The login form with the API's throttle: refused before the password is checked."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password did not match, or the account is not active yet.",
    }
    throttled_for: int | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        request = self.request  # LoginView always passes it
        if request is None or username is None or not self.cleaned_data.get("password"):
            return super().clean()
        wait = throttle.begin(request, username)
        if wait is not None:
            self.throttled_for = wait
            raise forms.ValidationError(throttle.message(wait), code="throttled")
        try:
            return super().clean()
        finally:
            # user_cache is set once the password is right, even if the login is then refused
            # (inactive, or not staff on the admin): only a wrong password counts as a guess.
            if self.user_cache is not None:
                throttle.succeeded(request, username)


class ThrottledAdminLogin(ThrottledLogin, AdminAuthenticationForm):
    error_messages = AdminAuthenticationForm.error_messages


def _throttle_status(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Answer 429 with Retry-After when the login form was refused by the throttle."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        wait = getattr(form, "throttled_for", None)
        if wait is not None:
            response.status_code = 429
            response["Retry-After"] = str(wait)
        return response

    return wrapped


admin.site.login_form = ThrottledAdminLogin
login_page = _throttle_status(auth_views.LoginView.as_view(authentication_form=ThrottledLogin))
admin_login = _throttle_status(admin.site.login)


class SignupForm(UserCreationForm):  # type: ignore[type-arg]
    email = forms.EmailField(required=True)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


def signup(request: HttpRequest) -> HttpResponse:
    """PADDLECLOUD_SIGNUP: open (active at once), approval (staff activate it: accounts/admin.py), closed (404)."""
    mode = settings.PADDLECLOUD_SIGNUP
    if mode == "closed":
        raise Http404("signup is closed; ask an operator for an account")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        wait = throttle.signup(request)  # only a valid form counts: a typo costs no one a signup
        if wait is not None:
            form.add_error(None, f"Too many accounts were made from your address; try again in {wait} seconds.")
            response = render(request, "accounts/signup.html", {"form": form, "mode": mode}, status=429)
            response["Retry-After"] = str(wait)
            return response
        user = form.save(commit=False)
        user.is_active = mode == "open"
        user.save()
        newcomers.welcome(user)  # a small quota in every datacenter until an operator raises it
        if user.is_active:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("home")
        messages.info(request, "Account created. An operator must approve it before you can log in.")
        return redirect("login")
    status = 400 if request.method == "POST" else 200
    return render(request, "accounts/signup.html", {"form": form, "mode": mode}, status=status)


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # guaranteed by @login_required
    return request.user


@never_cache  # it shows the API token: no browser or proxy keeps a copy (Cache-Control: no-store)
@login_required
def profile(request: HttpRequest) -> HttpResponse:
    token = current_token(_user(request))
    registries = RegistrySecret.objects.filter(owner=_user(request)).order_by("name")
    return render(
        request,
        "accounts/profile.html",
        {
            "token": token,
            "registries": registries,
            "public_url": settings.PADDLECLOUD_PUBLIC_URL,
            "datacenters": list(Datacenter.objects.usable_by(request.user).values_list("name", flat=True)),
        },
    )


@login_required
@require_POST
def regenerate(request: HttpRequest) -> HttpResponse:
    regenerate_token(_user(request))
    messages.success(request, "A new API token was issued; the old ones no longer work.")
    return redirect("profile")


class PasswordChange(auth_views.PasswordChangeView):
    """Django's page (this browser stays logged in); the save revokes the tokens (accounts/signals.py)."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("profile")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        messages.success(self.request, "Password changed. Your old API tokens and other sessions no longer work.")
        return response


password_change = never_cache(PasswordChange.as_view())
