"""Every API operation (from the OpenAPI generator) tried by alice, bob, carol and anonymous.

Alice owns the objects; bob must never reach them (404 for objects by name or id, 403 for another
user's home, nothing of hers in his lists); carol is an operator, who alone sets quotas but does not
see users' jobs, uploads or homes through the API; anonymous gets 401 everywhere but the public calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.adversarial.conftest import (
    SWEEP,
    Operation,
    World,
    api_url_patterns,
    error_body,
    operations,
    snapshot,
)
from tests.conftest import PASSWORD
from tests.storage.conftest import checksum

HOME = "/pfs/local/home/alice"
OK = (200, 201, 204)


@dataclass(frozen=True)
class Route:
    """How to call one operation on alice's objects, and what each persona must get."""

    url: str  # {upload} is alice's open upload's id
    alice: int | tuple[int, ...]
    bob: int
    carol: int
    anon: int = 401
    body: Any = None
    raw: bytes | None = None  # a chunk's bytes (with its checksum header)
    headers: dict[str, Any] = field(default_factory=dict)  # WSGI environ extras (HTTP_*)


def login(username: str = "alice") -> dict[str, str]:
    return {"username": username, "password": PASSWORD}


def _chunk_headers() -> dict[str, str]:
    return {"HTTP_X_CHUNK_CHECKSUM": checksum(b"x" * 65536)}


ROUTES: dict[Operation, Route] = {
    ("POST", "/api-token-auth/"): Route("/api-token-auth/", 200, 200, 200, anon=200, body=login()),
    ("POST", "/api/v1/auth/token"): Route("/api/v1/auth/token", 200, 200, 200, anon=200, body=login()),
    ("DELETE", "/api/v1/auth/token"): Route("/api/v1/auth/token", 204, 204, 204),
    ("GET", "/api/v1/datacenters"): Route("/api/v1/datacenters", 200, 200, 200),
    ("GET", "/api/v1/datacenters/{name}"): Route("/api/v1/datacenters/local", 200, 200, 200),
    ("PATCH", "/api/v1/datacenters/{name}"): Route(
        "/api/v1/datacenters/local", 403, 403, 200, body={"capacity": {"cpu": "4"}}
    ),
    ("GET", "/api/v1/files/download"): Route(f"/api/v1/files/download?path={HOME}/data.txt", 200, 403, 403),
    ("GET", "/api/v1/files/ls"): Route(f"/api/v1/files/ls?path={HOME}", 200, 403, 403),
    ("GET", "/api/v1/files/stat"): Route(f"/api/v1/files/stat?path={HOME}/data.txt", 200, 403, 403),
    ("POST", "/api/v1/files/mkdir"): Route("/api/v1/files/mkdir", 201, 403, 403, body={"path": f"{HOME}/new"}),
    ("POST", "/api/v1/files/rm"): Route("/api/v1/files/rm", 200, 403, 403, body={"path": f"{HOME}/data.txt"}),
    ("GET", "/api/v1/files/uploads"): Route("/api/v1/files/uploads", 200, 200, 200),
    ("POST", "/api/v1/files/uploads"): Route(
        "/api/v1/files/uploads",
        201,
        403,
        403,
        body={"path": f"{HOME}/up.bin", "size": 0, "checksum": "xxh3_128:99aa06d3014798d86001c324468d497f"},
    ),
    ("GET", "/api/v1/files/uploads/{upload_id}"): Route("/api/v1/files/uploads/{upload}", 200, 404, 404),
    ("DELETE", "/api/v1/files/uploads/{upload_id}"): Route("/api/v1/files/uploads/{upload}", 204, 404, 404),
    ("PUT", "/api/v1/files/uploads/{upload_id}/chunks/{index}"): Route(
        "/api/v1/files/uploads/{upload}/chunks/0", 200, 404, 404, raw=b"x" * 65536, headers=_chunk_headers()
    ),
    # Alice's upload still misses its chunks: completing it is refused, but only she learns that.
    ("POST", "/api/v1/files/uploads/{upload_id}/complete"): Route(
        "/api/v1/files/uploads/{upload}/complete", 409, 404, 404
    ),
    ("GET", "/api/v1/experiments"): Route("/api/v1/experiments", 200, 200, 200),
    # Bob and carol may start sweeps, but not over alice's package folder.
    ("POST", "/api/v1/experiments"): Route("/api/v1/experiments", 201, 400, 400, body={**SWEEP, "name": "grid2"}),
    ("GET", "/api/v1/experiments/{name}"): Route("/api/v1/experiments/grid", 200, 404, 404),
    ("GET", "/api/v1/experiments/{name}/trials"): Route("/api/v1/experiments/grid/trials", 200, 404, 404),
    ("POST", "/api/v1/experiments/{name}/kill"): Route("/api/v1/experiments/grid/kill", 200, 404, 404),
    ("GET", "/api/v1/images"): Route("/api/v1/images", 200, 200, 200),
    # The world's datacenter runs local jobs: a build request is refused there, for everyone alike.
    ("POST", "/api/v1/images"): Route(
        "/api/v1/images",
        400,
        400,
        400,
        body={"package": f"{HOME}/jobs/fit", "image": "harbor.example.com/alice/fit:2", "registry": "harbor"},
    ),
    ("GET", "/api/v1/images/{uid}"): Route("/api/v1/images/build-alice001", 200, 404, 404),
    ("DELETE", "/api/v1/images/{uid}"): Route("/api/v1/images/build-alice001", 200, 404, 404),
    ("GET", "/api/v1/images/{uid}/log"): Route("/api/v1/images/build-alice001/log", 200, 404, 404),
    ("GET", "/api/v1/jobs"): Route("/api/v1/jobs", 200, 200, 200),
    ("GET", "/api/v1/jobs/"): Route("/api/v1/jobs/", 200, 200, 200),
    # Bob and carol may submit, but not from alice's package folder.
    ("POST", "/api/v1/jobs"): Route(
        "/api/v1/jobs", 201, 400, 400, body={"jobname": "fit2", "entry": "python t.py", "package": f"{HOME}/jobs/fit"}
    ),
    ("POST", "/api/v1/jobs/"): Route(
        "/api/v1/jobs/", 201, 400, 400, body={"jobname": "fit2", "entry": "python t.py", "package": f"{HOME}/jobs/fit"}
    ),
    ("GET", "/api/v1/jobs/{name}"): Route("/api/v1/jobs/fit", 200, 404, 404),
    ("DELETE", "/api/v1/jobs/{name}"): Route("/api/v1/jobs/fit", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/logs"): Route("/api/v1/jobs/fit/logs", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/logs/search"): Route("/api/v1/jobs/fit/logs/search?q=loss", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/events"): Route("/api/v1/jobs/fit/events", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/metrics"): Route("/api/v1/jobs/fit/metrics", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/checkpoints"): Route("/api/v1/jobs/fit/checkpoints", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/workers"): Route("/api/v1/jobs/fit/workers", 200, 404, 404),
    ("GET", "/api/v1/jobs/{name}/usage"): Route("/api/v1/jobs/fit/usage", 200, 404, 404),
    # Operators act on any user's waiting job; users may not.
    ("POST", "/api/v1/jobs/{name}/hold"): Route("/api/v1/jobs/fit/hold", 403, 403, 200),
    ("POST", "/api/v1/jobs/{name}/release"): Route("/api/v1/jobs/fit/release", 403, 403, 200),
    ("POST", "/api/v1/jobs/{name}/front"): Route("/api/v1/jobs/fit/front", 403, 403, 200),
    ("GET", "/api/v1/priorities"): Route("/api/v1/priorities", 200, 200, 200),
    ("GET", "/api/v1/queue"): Route("/api/v1/queue?datacenter=local", 200, 200, 200),
    ("GET", "/api/v1/notifications"): Route("/api/v1/notifications", 200, 200, 200),
    ("PUT", "/api/v1/notifications"): Route(
        "/api/v1/notifications", 200, 200, 200, body={"email": True, "webhook": ""}
    ),
    ("GET", "/api/v1/quota"): Route("/api/v1/quota", 200, 200, 200),
    ("GET", "/api/v1/quota/{datacenter}/{username}"): Route("/api/v1/quota/local/alice", 403, 403, 200),
    ("PUT", "/api/v1/quota/{datacenter}/{username}"): Route(
        "/api/v1/quota/local/alice", 403, 403, 200, body={"gpu": 2}
    ),
    ("GET", "/api/v1/registry/"): Route("/api/v1/registry/", 200, 200, 200),
    ("POST", "/api/v1/registry/"): Route(
        "/api/v1/registry/",
        201,
        201,
        201,
        body={"name": "quay", "server": "quay.example.com", "username": "u", "password": "p"},
    ),
    ("GET", "/api/v1/registry/{name}/"): Route("/api/v1/registry/harbor/", 200, 404, 404),
    ("DELETE", "/api/v1/registry/{name}/"): Route("/api/v1/registry/harbor/", 204, 404, 404),
    ("GET", "/api/v1/usage"): Route("/api/v1/usage", 200, 200, 200),
    ("GET", "/api/v1/version"): Route("/api/v1/version", 200, 200, 200, anon=200),
}
PERSONAS = ("alice", "bob", "carol", "anon")
# What must never appear in an answer to anyone but alice (her job, secret, upload, files).
ALICES = ("harbor", "data.txt", '"fit"', "alice's data", '"grid"')
# Where an operator sees her job by design: the queue (staff see every job's name) and the queue verbs.
STAFF_SEE_JOBS = {
    ("GET", "/api/v1/queue"),
    ("POST", "/api/v1/jobs/{name}/hold"),
    ("POST", "/api/v1/jobs/{name}/release"),
    ("POST", "/api/v1/jobs/{name}/front"),
}


def call(world: World, persona: str, method: str, route: Route) -> Any:
    api = world.api(persona)
    url = route.url.replace("{upload}", world.upload["id"])
    body = route.body
    if persona != "alice" and body is not None and body.get("username") == "alice":
        body = login(persona if persona != "anon" else "alice")
    if route.raw is not None:
        # DRF sends bytes as they are (force_bytes); its stubs say str.
        return api.generic(method, url, route.raw, content_type="application/octet-stream", **route.headers)  # type: ignore[arg-type]
    return api.generic(method, url, "" if body is None else json.dumps(body), content_type="application/json")


def test_every_operation_has_a_persona_entry() -> None:
    assert sorted(ROUTES) == operations(), "add the new route to ROUTES (and to the bad-input table)"


def test_every_api_url_pattern_is_in_the_schema() -> None:
    # A view left out of the schema would escape the tables: each URL pattern must map to an operation.
    documented = {path for _, path in operations()}
    for pattern in api_url_patterns():
        shape = re.sub(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)", lambda m: "{%s}" % (m[1] or m[2]), pattern)
        shape = shape.replace("^", "").replace("$", "").replace("/?", "/")
        assert shape in documented or shape.rstrip("/") in documented, f"{pattern} is not in the OpenAPI schema"


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(("method", "path"), sorted(ROUTES), ids=[f"{m} {p}" for m, p in sorted(ROUTES)])
def test_persona_on_every_operation(world: World, persona: str, method: str, path: str) -> None:
    route = ROUTES[(method, path)]
    expected = {"alice": route.alice, "bob": route.bob, "carol": route.carol, "anon": route.anon}[persona]
    before = snapshot(world)
    response = call(world, persona, method, route)
    wanted = expected if isinstance(expected, tuple) else (expected,)
    assert response.status_code in wanted, (persona, response.status_code, response.content[:500])
    if response.status_code >= 400:
        body = error_body(response)
        if response.status_code == 401:
            assert body["code"] in ("not_authenticated", "authentication_failed"), body
            assert response["WWW-Authenticate"] == "Token"
        assert snapshot(world) == before, f"{persona}'s refused {method} {path} changed something"
    if (
        persona != "alice"
        and response.status_code in OK
        and response.get("Content-Type", "").startswith("application/json")
        and not (persona == "carol" and (method, path) in STAFF_SEE_JOBS)
    ):
        text = response.content.decode()
        for mark in ALICES:
            assert mark not in text, f"{persona} saw alice's {mark} in {method} {path}: {text[:300]}"
    if method == "DELETE" and path == "/api/v1/auth/token" and persona != "alice":
        assert world.alice_api.get("/api/v1/quota").status_code == 200  # only the caller's token is revoked
