"""Security headers on every page (CSP, Permissions-Policy and Django's own), and plain 404/500 pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, path, reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from datacenters.models import Datacenter
from tests.conftest import PASSWORD


def _plain_routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[str]:
    """Every route of the URL configuration that takes no parameter, as a path."""
    found = []
    for pattern in patterns:
        route = str(pattern.pattern)
        if any(mark in route for mark in ("<", "(", "?", "$", "^")):
            continue  # takes a parameter (the admin's own routes are covered by ADMIN_PAGES)
        if isinstance(pattern, URLResolver):
            found.extend(_plain_routes(pattern.url_patterns, prefix + route))
        else:
            found.append("/" + prefix + route)
    return found


def _admin_pages() -> list[str]:
    pages = ["/admin/", "/admin/login/", "/admin/password_change/"]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        pages.append(reverse("admin:{}_{}_changelist".format(*info)))
        pages.append(reverse("admin:{}_{}_add".format(*info)))
    return pages


def _pages() -> list[str]:
    return sorted(set(_plain_routes(get_resolver().url_patterns)) | set(_admin_pages())
                  | {"/api/docs/?script=", "/static/css/portal.css", "/static/js/logs.js", "/no/such/page/"})


EXPECTED = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def assert_security_headers(response: HttpResponseBase, page: str) -> None:
    csp = response.headers.get("Content-Security-Policy", "")
    assert "default-src 'self'" in csp and "script-src 'self'" in csp, page
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp, page
    # 'wasm-unsafe-eval' (WebAssembly only, on the pages that hash uploads) is allowed; eval() never is.
    assert "unsafe-inline" not in csp and "'unsafe-eval'" not in csp, page
    policy = response.headers.get("Permissions-Policy", "")
    assert "camera=()" in policy and "geolocation=()" in policy and "microphone=()" in policy, page
    for name, value in EXPECTED.items():
        if name == "X-Frame-Options" and page.startswith("/static/"):
            continue  # whitenoise answers before that middleware; frame-ancestors covers it
        assert response.headers.get(name) == value, (page, name)


def test_the_page_list_covers_the_routes() -> None:
    pages = _pages()
    for expected in ("/", "/login/", "/signup/", "/profile/", "/jobs/", "/api/v1/version", "/api/schema/",
                     "/api/docs/", "/admin/", "/admin/auth/user/add/"):
        assert expected in pages


@pytest.mark.parametrize("persona", ["anonymous", "alice", "carol"])
def test_every_page_answers_with_the_security_headers(
    persona: str, alice: User, carol: User, local_dc: Datacenter, settings: SettingsWrapper
) -> None:
    settings.WHITENOISE_USE_FINDERS = True  # static files served by whitenoise, collected or not
    client = Client()
    if persona != "anonymous":
        assert client.login(username=persona, password=PASSWORD)
    for page in _pages():
        response = client.get(page)
        assert response.status_code < 500, page
        if page.startswith("/static/"):
            assert response.status_code == 200, page
        assert_security_headers(response, page)


def test_the_api_docs_load_their_script_from_a_file_and_style_with_a_nonce(db: None) -> None:
    response = Client().get("/api/docs/")
    html = response.content.decode()
    csp = response.headers["Content-Security-Policy"]
    nonce = html.split('<style nonce="', 1)[1].split('"', 1)[0]
    assert f"'nonce-{nonce}'" in csp
    assert "<script>" not in html and 'src="/api/docs/?script="' in html
    script = Client().get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_pages_carry_no_inline_script(alice: User, local_dc: Datacenter) -> None:
    client = Client()
    client.login(username="alice", password=PASSWORD)
    for page in ("/", "/jobs/", "/profile/", "/login/", "/signup/"):
        html = client.get(page).content.decode()
        assert "<script>" not in html and " on" + "click=" not in html and "style=" not in html, page


def test_a_404_lists_no_url_patterns(alice: User, settings: SettingsWrapper) -> None:
    settings.DEBUG = False
    client = Client()
    client.login(username="alice", password=PASSWORD)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "Not found" in text
    assert "URLconf" not in text and "api/v1/" not in text and "admin/" not in text


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret detail from the server")


urlpatterns = [path("boom/", _boom)]


def test_a_500_shows_no_traceback(db: None, settings: SettingsWrapper) -> None:
    settings.DEBUG = False
    settings.ROOT_URLCONF = __name__
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    text = response.content.decode()
    assert "Server error" in text
    assert "Traceback" not in text and "secret detail" not in text and "RuntimeError" not in text
    assert_security_headers(response, "/boom/")


def test_no_template_has_inline_script_or_style() -> None:
    # The policy allows neither: every script and style must be a file under static/.
    root = Path(__file__).resolve().parents[2] / "templates"
    for template in root.rglob("*.html"):
        text = template.read_text()
        if template.relative_to(root).as_posix() == "drf_spectacular/swagger_ui.html":
            assert '<style nonce="{{ request.csp_nonce }}">' in text
            continue
        assert "<script>" not in text and "<style" not in text and "style=" not in text, template
        assert " on" + "click=" not in text and "javascript:" not in text, template


def test_the_pages_that_show_the_token_or_take_a_password_are_never_cached(alice: User) -> None:
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    for page in ("/profile/", "/profile/password/"):
        response = client.get(page)
        assert response.status_code == 200, page
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"], page
