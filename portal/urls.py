"""URL map: pages, admin, the versioned API and its OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from accounts import api as accounts_api
from accounts import views as accounts_views
from datacenters import api as datacenters_api
from datacenters import views as datacenters_views
from health import views as health_views
from jobs import page_urls
from jobs import views as job_views
from notifications import views as notification_views
from notifications.api import NotifyPreferenceView
from portal.views import VersionView
from registry import views as registry_views
from registry.api import RegistrySecretViewSet
from storage import views as storage_views


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers, bookmarks and crawlers ask for /favicon.ico whatever a page links: the static icon."""
    return redirect(static("favicon.ico"))


router = SimpleRouter()
router.trailing_slash = "/?"  # paddlectl calls paths both with and without the slash
router.register("registry", RegistrySecretViewSet, basename="registry")

api_v1 = [
    path("version", VersionView.as_view(), name="api-version"),
    path("auth/token", accounts_api.TokenView.as_view(), name="api-token"),
    path("datacenters", datacenters_api.DatacenterList.as_view(), name="api-datacenters"),
    path("datacenters/<str:name>", datacenters_api.DatacenterDetail.as_view(), name="api-datacenter"),
    path("quota", datacenters_api.QuotaView.as_view(), name="api-quota"),
    path("notifications", NotifyPreferenceView.as_view(), name="api-notifications"),
    path("quota/<str:datacenter>/<str:username>", datacenters_api.QuotaAdminView.as_view(), name="api-quota-admin"),
    path("files/", include("storage.urls")),
    path("", include("jobs.urls")),
    path("", include("images.urls")),
    *router.urls,
]

urlpatterns = [
    path("", job_views.home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("login/", accounts_views.login_page, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", accounts_views.signup, name="signup"),
    path("profile/", accounts_views.profile, name="profile"),
    path("profile/token/regenerate", accounts_views.regenerate, name="regenerate-token"),
    path("profile/password/", accounts_views.password_change, name="password-change"),
    path("profile/notifications/", notification_views.settings_page, name="notifications"),
    path("profile/notifications/test", notification_views.send_test, name="notifications-test"),
    path("jobs/", include("jobs.page_urls")),
    path("", include(page_urls.root_urlpatterns)),
    path("files/", storage_views.browser, name="file-browser"),
    path("files/mkdir", storage_views.make_folder, name="file-mkdir"),
    path("files/rm", storage_views.remove, name="file-rm"),
    path("registries/", registry_views.registry_list, name="registries"),
    path("registries/<str:name>/delete", registry_views.registry_delete, name="registries-delete"),
    path("quota/", datacenters_views.quota_page, name="quota"),
    path("health/", health_views.health_page, name="health"),
    path("admin/login/", accounts_views.admin_login),  # before admin/: the throttle's 429
    path("admin/", admin.site.urls),
    path("api-token-auth/", accounts_api.LegacyTokenView.as_view(), name="api-token-auth"),
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
