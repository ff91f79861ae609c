"""Jobs API routes (and the usage ledger's), mounted under /api/v1/."""

from django.urls import path

from jobs.api import checkpoints as api_checkpoints
from jobs.api import events as api_events
from jobs.api import jobs as api
from jobs.api import log_search as api_log_search
from jobs.api import metrics as api_metrics
from jobs.api import queue as api_queue
from jobs.api import usage as api_usage
from jobs.api import workers as api_workers

urlpatterns = [
    path("jobs", api.JobListCreate.as_view(), name="api-jobs"),
    path("jobs/", api.JobListCreate.as_view()),
    path("jobs/<str:name>", api.JobDetail.as_view(), name="api-job"),
    path("jobs/<str:name>/workers", api_workers.JobWorkers.as_view(), name="api-job-workers"),
    path("jobs/<str:name>/usage", api_workers.JobUsage.as_view(), name="api-job-usage"),
    path("jobs/<str:name>/logs", api.JobLogs.as_view(), name="api-job-logs"),
    path("jobs/<str:name>/logs/search", api_log_search.JobLogSearch.as_view(), name="api-job-log-search"),
    path("jobs/<str:name>/events", api_events.JobEvents.as_view(), name="api-job-events"),
    path("jobs/<str:name>/metrics", api_metrics.JobMetrics.as_view(), name="api-job-metrics"),
    path("jobs/<str:name>/checkpoints", api_checkpoints.JobCheckpoints.as_view(), name="api-job-checkpoints"),
    path("usage", api_usage.UsageView.as_view(), name="api-usage"),
    path("jobs/<str:name>/hold", api_queue.JobHold.as_view(), name="api-job-hold"),
    path("jobs/<str:name>/release", api_queue.JobRelease.as_view(), name="api-job-release"),
    path("jobs/<str:name>/front", api_queue.JobFront.as_view(), name="api-job-front"),
    path("queue", api_queue.QueueView.as_view(), name="api-queue"),
    path("priorities", api_queue.PriorityList.as_view(), name="api-priorities"),
]
