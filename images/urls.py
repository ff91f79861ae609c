"""Image builds' routes, mounted by the portal like every app's (an API only)."""

from django.urls import URLPattern, path

from images import api

api_urlpatterns: list[URLPattern] = [
    path("images", api.BuildListCreate.as_view(), name="api-images"),
    path("images/<str:uid>", api.BuildDetail.as_view(), name="api-image"),
    path("images/<str:uid>/log", api.BuildLog.as_view(), name="api-image-log"),
]

page_urlpatterns: list[URLPattern] = []
