"""Health's routes, mounted by the portal like every app's."""

from django.urls import URLPattern, path

from health import views

page_urlpatterns: list[URLPattern] = [
    path("health/", views.health_page, name="health"),
]

api_urlpatterns: list[URLPattern] = []
