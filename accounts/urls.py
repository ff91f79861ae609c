"""Accounts' routes, mounted by the portal like every app's: its pages at the root, its API under /api/v1/."""

from django.contrib.auth import views as auth_views
from django.urls import URLPattern, path

from accounts import api, views

page_urlpatterns: list[URLPattern] = [
    path("login/", views.login_page, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", views.signup, name="signup"),
    path("profile/", views.profile, name="profile"),
    path("profile/token/regenerate", views.regenerate, name="regenerate-token"),
    path("profile/password/", views.password_change, name="password-change"),
    path("admin/login/", views.admin_login),  # before the admin's own routes (the portal's): the throttle's 429
    path("api-token-auth/", api.LegacyTokenView.as_view(), name="api-token-auth"),
]

api_urlpatterns: list[URLPattern] = [
    path("auth/token", api.TokenView.as_view(), name="api-token"),
]
