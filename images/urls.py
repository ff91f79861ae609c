"""Image build API routes, mounted under /api/v1/."""

from django.urls import path

from images import api

urlpatterns = [
    path("images", api.BuildListCreate.as_view(), name="api-images"),
    path("images/<str:uid>", api.BuildDetail.as_view(), name="api-image"),
    path("images/<str:uid>/log", api.BuildLog.as_view(), name="api-image-log"),
]
