"""Paths that name no file (/pfs, /pfs/<dc>) or are not UTF-8: a 400 naming the rule on every route, nothing made."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.models import Job
from storage import paths
from storage.models import Upload
from tests.storage.conftest import checksum

SHORT = ["/pfs", "/pfs/", "//pfs//", "/pfs/local", "/pfs/local/", "/pfs/elsewhere"]
AREA_RULE = "must name a datacenter and an area below it"
# Bytes that are not UTF-8, percent-encoded in a query string as a careless or hostile client sends them.
NOT_UTF8 = ["%FF", "%C3%28", "caf%E9", "%ED%A0%80"]


def everything(root: Path) -> list[str]:
    return sorted(os.path.relpath(Path(d, n), root) for d, dirs, names in os.walk(root) for n in dirs + names)


def _json_routes(api: APIClient, path: str) -> dict[str, Any]:
    def post(url: str, body: dict[str, Any]) -> Any:
        return api.generic("POST", url, json.dumps(body), content_type="application/json")

    return {
        "mkdir": post("/api/v1/files/mkdir", {"path": path, "parents": True}),
        "rm": post("/api/v1/files/rm", {"path": path, "recursive": True}),
        "upload": post("/api/v1/files/uploads", {"path": path, "size": 5, "checksum": checksum(b"hello")}),
        "job package": post(
            "/api/v1/jobs", {"jobname": "fit", "entry": "python train.py", "package": path, "datacenter": "local"}
        ),
    }


def _assert_refused(response: Any, field: str, rule: str) -> None:
    assert response.status_code == 400, response.content[:300]
    payload = response.json()
    assert payload["code"] == "invalid"
    assert payload["errors"][0]["field"] == field, payload
    assert rule in payload["errors"][0]["message"], payload
    assert f"{field}: " in payload["detail"]


@pytest.mark.parametrize("path", SHORT)
def test_a_path_without_an_area_is_a_400_on_every_route(
    alice_api: APIClient, root: Path, home: Path, path: str
) -> None:
    before = everything(root)
    for route, response in _json_routes(alice_api, path).items():
        _assert_refused(response, "package" if route == "job package" else "path", AREA_RULE)
    for name in ("ls", "stat", "download"):
        _assert_refused(alice_api.get(f"/api/v1/files/{name}", {"path": path}), "path", AREA_RULE)
    _assert_refused(alice_api.get("/api/v1/files/uploads", {"path": path}), "path", AREA_RULE)
    assert everything(root) == before
    assert not Upload.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("encoded", NOT_UTF8)
@pytest.mark.parametrize("route", ["ls", "stat", "download", "uploads"])
def test_a_path_that_is_not_utf8_is_a_400_not_a_404(
    alice_api: APIClient, root: Path, home: Path, encoded: str, route: str
) -> None:
    (home / "caf").mkdir()
    before = everything(root)
    response = alice_api.get(f"/api/v1/files/{route}?path=/pfs/local/home/alice/{encoded}")
    _assert_refused(response, "path", "not valid UTF-8")
    assert everything(root) == before


def test_a_json_body_that_is_not_utf8_is_a_400_naming_the_rule(alice_api: APIClient, root: Path, home: Path) -> None:
    before = everything(root)
    body = b'{"path": "/pfs/local/home/alice/caf\xe9", "parents": true}'
    # DRF sends bytes as they are (force_bytes); its stubs say str.
    response = alice_api.generic("POST", "/api/v1/files/mkdir", body, content_type="application/json")  # type: ignore[arg-type]
    assert response.status_code == 400
    assert "not valid 'utf-8' text" in response.json()["detail"]
    assert everything(root) == before


def test_the_parser_is_the_one_rule(db: None) -> None:
    """The rule lives in storage.paths.parse; every route above reaches it."""
    for path in SHORT:
        with pytest.raises(Exception) as error:
            paths.parse(path)
        assert AREA_RULE in str(error.value)
    assert paths.parse("/pfs/local/public") == ["local", "public"]


def test_a_name_on_disk_that_is_not_utf8_is_listed_with_a_replacement(alice_api: APIClient, home: Path) -> None:
    (home / os.fsdecode(b"bad\xff")).mkdir()
    for recursive in ("false", "true"):
        response = alice_api.get("/api/v1/files/ls", {"path": "/pfs/local/home/alice", "recursive": recursive})
        assert response.status_code == 200, response.content[:300]
        assert [e["name"] for e in response.json()["results"]] == ["bad\ufffd"]
    listed = response.json()["results"][0]["path"]
    _assert_refused(alice_api.get("/api/v1/files/stat", {"path": listed}), "path", "not valid UTF-8")
