"""The jobs app's routes, mounted by the portal like every app's: its pages (jobs.web.urls) and API (jobs.api.urls)."""

from jobs.api.urls import urlpatterns as api_urlpatterns
from jobs.web.urls import urlpatterns as page_urlpatterns

__all__ = ["api_urlpatterns", "page_urlpatterns"]
