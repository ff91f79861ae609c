"""Experiments' routes, mounted by the portal like every app's (an API for now; the pages come with the compare
view)."""

from django.urls import URLPattern, path

from experiments import api

api_urlpatterns: list[URLPattern] = [
    path("experiments", api.ExperimentListCreate.as_view(), name="api-experiments"),
    path("experiments/<str:name>", api.ExperimentDetail.as_view(), name="api-experiment"),
    path("experiments/<str:name>/trials", api.ExperimentTrials.as_view(), name="api-experiment-trials"),
    path("experiments/<str:name>/kill", api.ExperimentKill.as_view(), name="api-experiment-kill"),
]

page_urlpatterns: list[URLPattern] = []
