"""Job pages: the home page, one job's pages under /jobs/ (<ref> is a job's uid or its name, the newest run), and
the queue, usage and compare pages at the root (/queue/, /usage/, /compare/: under /jobs/ a job so named would
shadow them)."""

from django.urls import URLPattern, URLResolver, include, path

from jobs.web import compare, views

job_pages: list[URLPattern] = [
    path("", views.job_list, name="job-list"),
    path("new", views.job_new, name="job-new"),
    path("<str:ref>/", views.job_detail, name="job-detail"),
    path("<str:ref>/live", views.job_live, name="job-live"),
    path("<str:ref>/place", views.job_place, name="job-place"),
    path("<str:ref>/logs", views.job_logs, name="job-logs"),
    path("<str:ref>/logs/<str:worker>/download", views.log_download, name="job-log-download"),
    path("<str:ref>/kill", views.job_kill, name="job-kill"),
    path("<str:ref>/delete", views.job_delete, name="job-delete"),
]

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.home, name="home"),
    path("jobs/", include(job_pages)),
    path("queue/", views.queue_page, name="queue"),
    path("queue/<str:ref>/<str:verb>", views.queue_action, name="queue-action"),
    path("usage/", views.usage_page, name="usage"),
    path("compare/", compare.compare_page, name="compare"),
    path("compare/curves.json", compare.compare_curves, name="compare-curves"),
]
