"""Job pages, mounted at /jobs/."""

from django.urls import path

from jobs import views

urlpatterns = [
    path("", views.job_list, name="job-list"),
    path("<str:uid>/", views.job_detail, name="job-detail"),
    path("<str:uid>/kill", views.job_kill, name="job-kill"),
]
