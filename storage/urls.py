"""Storage API routes, mounted at /api/v1/files/ (filled by the storage issue)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
