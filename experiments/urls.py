"""Experiments' routes, mounted by the portal like every app's: the API, and the pages under /experiments/."""

from django.urls import URLPattern, path

from experiments import api, web

api_urlpatterns: list[URLPattern] = [
    path("experiments", api.ExperimentListCreate.as_view(), name="api-experiments"),
    path("experiments/<str:name>", api.ExperimentDetail.as_view(), name="api-experiment"),
    path("experiments/<str:name>/trials", api.ExperimentTrials.as_view(), name="api-experiment-trials"),
    path("experiments/<str:name>/kill", api.ExperimentKill.as_view(), name="api-experiment-kill"),
]

page_urlpatterns: list[URLPattern] = [
    path("experiments/", web.experiment_list, name="experiment-list"),
    path("experiments/<str:ref>/", web.experiment_detail, name="experiment-detail"),
    path("experiments/<str:ref>/curves.json", web.experiment_curves, name="experiment-curves"),
    path("experiments/<str:ref>/trials.csv", web.experiment_csv, name="experiment-csv"),
    path("experiments/<str:ref>/kill", web.experiment_kill, name="experiment-kill"),
]
