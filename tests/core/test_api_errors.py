"""Every API error is the one JSON shape, bounded in size, naming the parameter at fault; pages keep HTML."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from core.api.errors import MAX_ERRORS
from core.api.parsers import MAX_DEPTH
from datacenters.models import Datacenter
from jobs.models import Job
from registry.models import RegistrySecret
from storage.models import Upload

MAX_BODY = 8 * 1024  # what any error body stays under, whatever was sent
SECRET = {"name": "harbor", "server": "harbor.example.com", "username": "robot", "password": "pw"}


def assert_shape(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert len(response.content) < MAX_BODY, len(response.content)
    payload: dict[str, Any] = response.json()
    assert set(payload) == {"detail", "code", "errors"}
    assert payload["detail"] and isinstance(payload["errors"], list)
    if code is not None:
        assert payload["code"] == code, payload
    return payload


def assert_names(payload: dict[str, Any], field: str, rule: str) -> None:
    assert any(e["field"] == field and rule in e["message"] for e in payload["errors"]), payload
    assert f"{field}: " in payload["detail"]


# --- routes, methods, media types -------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/jobs/x/nope", "/api/v2/jobs", "/api/", "/api/v1/files/"])
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "PUT"])
def test_an_unknown_api_url_is_a_json_404(alice_api: APIClient, path: str, method: str) -> None:
    payload = assert_shape(alice_api.generic(method, path), 404, "not_found")
    assert "no API route" in payload["detail"] and path in payload["detail"]


def test_an_unknown_api_url_is_json_for_anonymous_too(anon_api: APIClient, db: None) -> None:
    assert_shape(anon_api.get("/api/v1/nope"), 404, "not_found")


def test_an_unknown_page_keeps_the_html_404(anon_api: APIClient, db: None) -> None:
    response = anon_api.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_a_huge_unknown_url_is_quoted_short(alice_api: APIClient) -> None:
    assert_shape(alice_api.get("/api/v1/" + "x" * 50_000), 404, "not_found")


def test_a_wrong_method_is_a_json_405(alice_api: APIClient) -> None:
    assert_shape(alice_api.put("/api/v1/version", {}, format="json"), 405, "method_not_allowed")


def test_a_wrong_media_type_is_a_json_415(alice_api: APIClient) -> None:
    response = alice_api.generic("POST", "/api/v1/registry", "name=x", content_type="application/x-www-form-urlencoded")
    assert_shape(response, 415, "unsupported_media_type")
    assert not RegistrySecret.objects.exists()


# --- bodies -----------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_a_json_413(alice_api: APIClient, local_dc: Datacenter) -> None:
    body = json.dumps({"jobname": "fit", "entry": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    payload = assert_shape(alice_api.generic("POST", "/api/v1/jobs", body, content_type="application/json"), 413)
    assert payload["code"] == "too_large" and str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in payload["detail"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 2_000, 200_000])
@pytest.mark.parametrize("bracket", ["[]", '{"a":}'])
def test_json_nested_too_deep_is_a_400_naming_the_rule(
    alice_api: APIClient, local_dc: Datacenter, depth: int, bracket: str
) -> None:
    opening, closing = (bracket[:-1], bracket[-1]) if bracket == "[]" else ('{"a":', "}")
    body = opening * depth + "1" + closing * depth
    response = alice_api.generic("POST", "/api/v1/jobs", body, content_type="application/json")
    payload = assert_shape(response, 400, "parse_error")
    assert f"nests deeper than {MAX_DEPTH} levels" in payload["detail"]
    assert not Job.objects.exists()


def test_json_just_within_the_depth_is_parsed(alice_api: APIClient) -> None:
    body = json.dumps({**SECRET, "name": [[["x"]]]})
    payload = assert_shape(alice_api.generic("POST", "/api/v1/registry", body, content_type="application/json"), 400)
    assert payload["errors"][0]["field"] == "name"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_refused(alice_api: APIClient, constant: str) -> None:
    body = f'{{"name": "x", "server": {constant}}}'
    response = alice_api.generic("POST", "/api/v1/registry", body, content_type="application/json")
    assert constant.lstrip("-") in assert_shape(response, 400, "parse_error")["detail"]


def test_a_body_not_in_its_charset_is_a_400(alice_api: APIClient) -> None:
    body = '{"name": "caf\u00e9"}'.encode()
    # DRF sends bytes as they are (force_bytes); its stubs say str.
    response = alice_api.generic(
        "POST", "/api/v1/registry", body, content_type="application/json; charset=us-ascii"  # type: ignore[arg-type]
    )
    assert "not valid 'us-ascii' text" in assert_shape(response, 400, "parse_error")["detail"]


# --- bounded size -----------------------------------------------------------------------------


def test_thousands_of_unknown_fields_give_a_bounded_body(alice_api: APIClient) -> None:
    body = {**SECRET, **{f"field{i}": i for i in range(5_000)}}
    payload = assert_shape(alice_api.post("/api/v1/registry", body, format="json"), 400, "invalid")
    assert len(payload["errors"]) == MAX_ERRORS
    assert "more error(s)" in payload["detail"]
    assert not RegistrySecret.objects.exists()


def test_a_huge_value_and_key_are_cut_in_the_message(alice_api: APIClient) -> None:
    body = {**SECRET, "name": "N" * 1_000_000, "k" * 100_000: 1}
    assert_shape(alice_api.post("/api/v1/registry", body, format="json"), 400, "invalid")


def test_a_huge_job_name_in_the_url_is_quoted_short(alice_api: APIClient) -> None:
    payload = assert_shape(alice_api.get("/api/v1/jobs/" + "j" * 20_000), 404, "not_found")
    assert "'" + "j" * 32 + "'…" in payload["detail"]
    assert "j" * 33 not in payload["detail"]


# --- query parameters: one rule for every list ------------------------------------------------

LISTS = ["/api/v1/jobs", "/api/v1/registry", "/api/v1/datacenters", "/api/v1/files/uploads", "/api/v1/files/ls"]
BAD_PAGES = ["0", "-1", "abc", "1.5", "", "9" * 5000, "last", "1e3", "0x10"]
BAD_SIZES = ["0", "-1", "1000000000", "501", "abc", "", "9" * 5000]


def _list(api: APIClient, path: str, **params: str) -> Any:
    if path.endswith("/ls"):
        params["path"] = "/pfs/local/home/alice"
    return api.get(path, params)


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("value", BAD_PAGES)
def test_a_bad_page_is_a_400_naming_page_on_every_list(
    alice_api: APIClient, local_dc: Datacenter, path: str, value: str
) -> None:
    payload = assert_shape(_list(alice_api, path, page=value), 400, "invalid")
    assert_names(payload, "page", "must be a whole number from 1")


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("value", BAD_SIZES)
def test_a_bad_page_size_is_a_400_naming_page_size_on_every_list(
    alice_api: APIClient, local_dc: Datacenter, path: str, value: str
) -> None:
    payload = assert_shape(_list(alice_api, path, page_size=value), 400, "invalid")
    assert_names(payload, "page_size", "must be a whole number from 1 to 500")


@pytest.mark.parametrize("path", LISTS)
def test_good_page_values_work_on_every_list(alice_api: APIClient, local_dc: Datacenter, path: str) -> None:
    for size in ("1", "500"):
        response = _list(alice_api, path, page="1", page_size=size)
        assert response.status_code == 200, response.content[:300]
        assert {"count", "next", "previous", "results"} <= set(response.json())


def test_a_page_past_the_end_is_a_404_naming_page(alice_api: APIClient) -> None:
    payload = assert_shape(alice_api.get("/api/v1/registry", {"page": "9"}), 404, "not_found")
    assert_names(payload, "page", "there are 1 page(s)")


def test_bad_worker_list_page_size_names_it(alice_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="fit", uid="fit-x1", spec={"parallelism": 1})
    payload = assert_shape(alice_api.get(f"/api/v1/jobs/{job.uid}/workers", {"page_size": "0"}), 400)
    assert_names(payload, "page_size", "from 1 to 500")


@pytest.mark.parametrize("cursor", ["-1", "abc", "9" * 5000, "1.5"])
def test_a_bad_log_cursor_names_it(alice_api: APIClient, alice: User, local_dc: Datacenter, cursor: str) -> None:
    job = Job.objects.create(
        owner=alice, datacenter=local_dc, name="fit", uid="fit-x1", spec={"parallelism": 1, "pservers": 0}
    )
    payload = assert_shape(alice_api.get(f"/api/v1/jobs/{job.uid}/logs", {"cursor": cursor}), 400, "invalid")
    assert payload["errors"][0]["field"] == "cursor"


@pytest.mark.parametrize("tail", ["-1", "abc", "9" * 5000, "100001", "١"])
def test_a_bad_log_tail_names_it(alice_api: APIClient, alice: User, local_dc: Datacenter, tail: str) -> None:
    job = Job.objects.create(
        owner=alice, datacenter=local_dc, name="fit", uid="fit-x1", spec={"parallelism": 1, "pservers": 0}
    )
    payload = assert_shape(alice_api.get(f"/api/v1/jobs/{job.uid}/logs", {"tail": tail}), 400, "invalid")
    assert_names(payload, "tail", "from 0 to 100000")


def test_a_bad_worker_name_is_quoted_short(alice_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    job = Job.objects.create(
        owner=alice, datacenter=local_dc, name="fit", uid="fit-x1", spec={"parallelism": 1, "pservers": 0}
    )
    payload = assert_shape(alice_api.get(f"/api/v1/jobs/{job.uid}/logs", {"worker": "w" * 10_000}), 400)
    assert_names(payload, "worker", "is not a worker of fit")


def _upload(alice_api: APIClient) -> dict[str, Any]:
    body = {"path": "/pfs/local/home/alice/f", "size": 5, "checksum": "xxh3_128:" + "0" * 32}
    response = alice_api.post("/api/v1/files/uploads", body, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


@pytest.mark.parametrize("index", ["-1", "-99999", "abc", "1.0", "9" * 40, "%20"])
def test_a_bad_chunk_index_is_a_json_400_naming_index(alice_api: APIClient, local_dc: Datacenter, index: str) -> None:
    upload = _upload(alice_api)
    response = alice_api.put(
        f"/api/v1/files/uploads/{upload['id']}/chunks/{index}",
        b"hello",
        content_type="application/octet-stream",
        HTTP_X_CHUNK_CHECKSUM="xxh3_128:" + "0" * 32,
    )
    assert_names(assert_shape(response, 400, "invalid"), "index", "must be a whole number from 0")
    assert Upload.objects.get().chunks.count() == 0


def test_a_negative_index_is_a_400_even_for_an_unknown_upload(alice_api: APIClient, local_dc: Datacenter) -> None:
    response = alice_api.put("/api/v1/files/uploads/nope/chunks/-1", b"x", content_type="application/octet-stream")
    assert_names(assert_shape(response, 400, "invalid"), "index", "whole number from 0")


@pytest.mark.parametrize("verify", ["maybe", "2", "", "x" * 5000])
def test_a_bad_verify_is_a_400_naming_verify(alice_api: APIClient, local_dc: Datacenter, verify: str) -> None:
    upload = _upload(alice_api)
    payload = assert_shape(alice_api.get(f"/api/v1/files/uploads/{upload['id']}", {"verify": verify}), 400)
    assert payload["errors"][0]["field"] == "verify"


# --- the database -----------------------------------------------------------------------------


def test_the_database_bounds_how_long_a_statement_waits(db: None) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] == settings.PADDLECLOUD_DB_BUSY_TIMEOUT * 1000
            assert connection.transaction_mode == "IMMEDIATE"  # type: ignore[attr-defined]  # SQLite's wrapper only
        else:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == f"{settings.PADDLECLOUD_DB_STATEMENT_TIMEOUT}s"


@pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3", reason="SQLite only")
def test_a_long_reader_does_not_block_a_writer_on_sqlite(transactional_db: None) -> None:
    name = connection.settings_dict["NAME"]
    connection.ensure_connection()  # journal_mode=WAL is set by the portal's own connections
    reader = sqlite3.connect(name, timeout=1, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM auth_user").fetchone()  # holds a read snapshot, as a long request would
    done = threading.Event()

    def write() -> None:
        User.objects.create_user("dave", password="x")
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(timeout=10)
    reader.rollback()
    reader.close()
    assert done.is_set() and User.objects.filter(username="dave").exists()


def test_the_wal_file_lives_beside_the_database(transactional_db: None) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    User.objects.create_user("erin", password="x")
    assert Path(str(connection.settings_dict["NAME"]) + "-wal").exists()


def test_a_refused_value_holding_a_lone_surrogate_is_a_400_not_a_500(
    alice_api: APIClient, local_dc: Datacenter
) -> None:
    """JSON's "\\ud800" parses to a lone surrogate, which UTF-8 cannot encode: the 400 that quotes it is written
    with it escaped (core/api/renderers.py), not a 500."""
    body = '{"jobname": "x", "entry": "python a.py", "stall_action": "\\ud800"}'
    response = alice_api.post("/api/v1/jobs", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    errors = json.loads(response.content)["errors"]
    assert errors[0]["field"] == "stall_action" and "\ud800" in errors[0]["message"], errors
