"""URL map: pages, admin, the versioned API and its OpenAPI schema."""

from types import ModuleType

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import urls as accounts_urls
from datacenters import urls as datacenters_urls
from experiments import urls as experiments_urls
from health import urls as health_urls
from images import urls as images_urls
from jobs import urls as jobs_urls
from notifications import urls as notifications_urls
from portal.views import VersionView
from registry import urls as registry_urls
from storage import urls as storage_urls

# One way for every app: its `<app>/urls.py` holds `page_urlpatterns` (mounted at the root) and `api_urlpatterns`
# (mounted under /api/v1/). Pages first by app, in this order, so an exact path (accounts' admin/login/) comes
# before the admin's own routes.
APPS: list[ModuleType] = [
    accounts_urls, datacenters_urls, registry_urls, storage_urls, jobs_urls, images_urls, experiments_urls,
    notifications_urls, health_urls,
]  # fmt: skip


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers, bookmarks and crawlers ask for /favicon.ico whatever a page links: the static icon."""
    return redirect(static("favicon.ico"))


api_v1: list[URLPattern | URLResolver] = [
    path("version", VersionView.as_view(), name="api-version"),
    *[path("", include(app.api_urlpatterns)) for app in APPS],
]

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    *[path("", include(app.page_urlpatterns)) for app in APPS],
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

admin.site.site_header = "PaddleCloud operators"
admin.site.site_title = "PaddleCloud admin"

# Outside DRF's views (no route matched, a request refused before any view) the API still answers JSON.
handler400 = "core.api.errors.bad_request"
handler404 = "core.api.errors.not_found"
handler500 = "core.api.errors.server_error"
