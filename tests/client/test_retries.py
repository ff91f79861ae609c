"""paddlectl's retries (sdk/session.py, files, jobs: all tenacity) against a real HTTP server on loopback."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.errors import APIError, NetworkError
from paddlecloud.sdk.jobs import _Outage
from paddlecloud.sdk.session import Session, transport_retrying
from paddlecloud.sdk.upload_chunks import ChunkSender

from tests.client.conftest import serving

Answer = tuple[int, bytes, dict[str, str]]


def _json(status: int, body: object) -> Answer:
    return status, json.dumps(body).encode(), {}


class Portal:
    """Answers each request with the next scripted answer for its (method, path); records every request."""

    def __init__(self) -> None:
        self.script: dict[tuple[str, str], list[Answer]] = {}
        self.seen: list[tuple[str, str]] = []
        self.bodies: list[bytes] = []  # of the PUTs
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.command == "PUT":
                    portal.bodies.append(body)
                key = (self.command, self.path.split("?", 1)[0])
                portal.seen.append(key)
                answers = portal.script.get(key) or [_json(404, {"detail": "not found", "code": "not_found"})]
                status, body, headers = answers.pop(0) if len(answers) > 1 else answers[0]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, method: str, path: str) -> int:
        return self.seen.count((method, f"/api/v1{path}"))


@pytest.fixture
def portal() -> Iterator[Portal]:
    p = Portal()
    with serving(p.server):
        yield p


@pytest.fixture
def session(portal: Portal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("PADDLECTL_RETRIES", "3")
    monkeypatch.setenv("PADDLECTL_RETRY_WAIT", "0.01")
    portal.script[("POST", "/api/v1/auth/token")] = [_json(200, {"token": "t0k3n"})]
    entry = configfile.Datacenter(name="dc", username="alice", endpoint=portal.url, password="pw", portal_name="dc")
    cache = configfile.TokenCache(portal.url, "alice", directory=tmp_path)
    return Session(entry, token_cache=cache, timeout=5)


def test_a_get_is_asked_again_while_the_portal_restarts(portal: Portal, session: Session) -> None:
    unavailable = _json(503, {"detail": "restarting", "code": "unavailable"})
    portal.script[("GET", "/api/v1/version")] = [unavailable, unavailable, _json(200, {"version": "1"})]
    assert session.get("/version", auth=False) == {"version": "1"}
    assert portal.count("GET", "/version") == 3


def test_the_last_5xx_is_the_message_when_retries_run_out(portal: Portal, session: Session) -> None:
    portal.script[("GET", "/api/v1/version")] = [_json(503, {"detail": "still restarting", "code": "unavailable"})]
    with pytest.raises(APIError, match="still restarting") as caught:
        session.get("/version", auth=False)
    assert caught.value.status == 503
    assert portal.count("GET", "/version") == 4  # one try and PADDLECTL_RETRIES=3 more


def test_a_post_is_sent_once(portal: Portal, session: Session) -> None:
    portal.script[("POST", "/api/v1/jobs")] = [_json(503, {"detail": "restarting", "code": "unavailable"})]
    with pytest.raises(APIError, match="restarting"):
        session.post("/jobs", {"jobname": "x"})
    assert portal.count("POST", "/jobs") == 1


def test_an_answer_cut_short_is_asked_again(portal: Portal, session: Session) -> None:
    cut = (200, b'{"vers', {"Content-Length": "6"})  # valid HTTP, but not the whole JSON document
    portal.script[("GET", "/api/v1/version")] = [cut, _json(200, {"version": "1"})]
    assert session.get("/version", auth=False) == {"version": "1"}
    assert portal.count("GET", "/version") == 2


def test_an_unreachable_portal_is_one_network_error(session: Session) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    session.datacenter = configfile.Datacenter(name="dc", username="alice", endpoint=down)
    with pytest.raises(NetworkError) as caught:
        session.get("/version", auth=False)
    assert str(caught.value) == f"cannot reach the portal at {down}: connection refused"


def test_a_chunk_damaged_on_the_way_is_sent_three_times_in_all(
    portal: Portal, session: Session, tmp_path: Path
) -> None:
    mismatch = _json(400, {"detail": "checksum does not match", "code": "checksum_mismatch"})
    portal.script[("PUT", "/api/v1/files/uploads/7/chunks/0")] = [mismatch, mismatch, _json(200, {})]
    local = tmp_path / "data.bin"
    local.write_bytes(b"datadata")
    fd = os.open(local, os.O_RDONLY)
    try:
        sender = ChunkSender(session, fd, local, {"id": 7, "size": 8, "chunk_size": 4}, None, parallel=1)
        assert sender.put(0) == 4
        assert portal.count("PUT", "/files/uploads/7/chunks/0") == 3

        portal.script[("PUT", "/api/v1/files/uploads/7/chunks/1")] = [mismatch]
        with pytest.raises(APIError, match="checksum does not match"):
            sender.put(1)
        assert portal.count("PUT", "/files/uploads/7/chunks/1") == 3
    finally:
        os.close(fd)
    assert portal.bodies == [b"data"] * 6  # each try sent the whole chunk again


def test_a_chunk_the_restarting_portal_refused_is_sent_again_whole(
    portal: Portal, session: Session, tmp_path: Path
) -> None:
    unavailable = _json(503, {"detail": "restarting", "code": "unavailable"})
    portal.script[("PUT", "/api/v1/files/uploads/7/chunks/0")] = [unavailable, unavailable, _json(200, {})]
    local = tmp_path / "data.bin"
    local.write_bytes(b"0123456789")
    fd = os.open(local, os.O_RDONLY)
    try:
        ChunkSender(session, fd, local, {"id": 7, "size": 10, "chunk_size": 10}, None, parallel=1).put(0)
    finally:
        os.close(fd)
    assert portal.bodies == [b"0123456789"] * 3


def test_log_following_waits_out_an_outage_and_says_so() -> None:
    told: list[str] = []
    failures = [NetworkError("cannot reach the portal at x: connection refused")]

    def flaky() -> str:
        if failures:
            raise failures.pop()
        return "answer"

    assert _Outage(30.0, told.append).call(flaky) == "answer"
    assert told == [
        "cannot reach the portal at x: connection refused; waiting for the portal to come back",
        "the portal is back; carrying on",
    ]


def test_without_an_outage_limit_the_first_failure_is_raised() -> None:
    told: list[str] = []

    def down() -> None:
        raise APIError(503, "restarting", "unavailable")

    with pytest.raises(APIError, match="restarting"):
        _Outage(0.0, told.append).call(down)
    assert told == []
    with pytest.raises(APIError, match="forbidden"):
        _Outage(30.0, told.append).call(lambda: (_ for _ in ()).throw(APIError(403, "forbidden", "denied")))
    assert told == []


def test_requests_wait_the_retry_wait_first_then_twice_as_long() -> None:
    class Restarting:
        status_code = 503

        def close(self) -> None:
            pass

    waits: list[float] = []
    tries: list[Restarting] = []

    def send() -> Restarting:
        tries.append(Restarting())
        return tries[-1]

    answer = transport_retrying(3, 0.5, sleep=waits.append)(send)
    assert answer is tries[-1] and len(tries) == 4  # the first try at once, then the last 503 is the answer
    assert waits == [0.5, 1.0, 2.0]
