"""/healthz and /readyz: answered whatever the Host (the kubelet's pod IP), 503 naming a dead dependency, fast."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import Client, override_settings

POD_HOST = "10.244.0.7:8000"  # what the kubelet sends; never contacted, only named in the header


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A loopback port that accepts connections and never answers: a hung broker."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://:s3cret-password@127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    thread.join()
    for conn in [*accepted, listener]:
        conn.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(path: str, **extra: Any) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    response = Client().get(path, HTTP_HOST=POD_HOST, **extra)
    return response.status_code, response.json(), time.monotonic() - started


def test_liveness_answers_for_the_pod_ip_that_allowed_hosts_refuses_elsewhere() -> None:
    status, answer, _ = get("/healthz")
    assert (status, answer) == (200, {"status": "ok"})
    response = Client().head("/healthz", HTTP_HOST=POD_HOST)
    assert response.status_code == 200
    assert (response["Cache-Control"], response["X-Content-Type-Options"]) == ("no-store", "nosniff")
    assert Client().get("/api/v1/version", HTTP_HOST=POD_HOST).status_code == 400  # the host check still holds


@pytest.mark.django_db
def test_readiness_reports_the_real_database_and_broker_ok() -> None:
    status, answer, _ = get("/readyz")
    assert (status, answer) == (200, {"database": "ok", "broker": "ok"})


@pytest.mark.django_db
def test_probes_need_no_login_no_csrf_and_refuse_writes_with_405() -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.get("/readyz", HTTP_HOST=POD_HOST).status_code == 200
    response = client.post("/readyz", HTTP_HOST=POD_HOST)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.django_db
def test_a_refused_broker_gives_503_naming_it_without_the_url_or_password() -> None:
    with override_settings(CELERY_BROKER_URL=f"redis://:s3cret-password@127.0.0.1:{closed_port()}/0"):
        status, answer, seconds = get("/readyz")
    assert status == 503
    assert answer["database"] == "ok"
    assert answer["broker"].startswith("unavailable (")
    assert answer["code"] == "unavailable"
    assert [e["field"] for e in answer["errors"]] == ["broker"]
    assert "s3cret" not in str(answer) and "127.0.0.1" not in str(answer)
    assert seconds < 10


@pytest.mark.django_db
def test_a_broker_that_never_answers_gives_503_within_a_bounded_time(silent_broker: str) -> None:
    with override_settings(CELERY_BROKER_URL=silent_broker):
        status, answer, seconds = get("/readyz")
    assert status == 503
    assert answer["broker"].startswith("unavailable (")
    assert "s3cret" not in str(answer)
    assert seconds < 10, f"the probe took {seconds:.1f} s"


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_gives_503_naming_it_and_recovers() -> None:
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    # A real failure of the real driver: SQLite cannot open a file in a missing folder; PostgreSQL
    # finds no server on a closed loopback port.
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-paddlecloud/db.sqlite3"
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
    try:
        status, answer, seconds = get("/readyz")
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert status == 503
    assert answer["database"].startswith("unavailable (")
    assert answer["broker"] == "ok"
    assert [e["field"] for e in answer["errors"]] == ["database"]
    assert "nonexistent" not in str(answer)
    assert seconds < 10
    assert get("/readyz")[:2] == (200, {"database": "ok", "broker": "ok"})


@pytest.mark.django_db
def test_behind_the_proxies_a_request_through_them_is_not_a_probe() -> None:
    with override_settings(PADDLECLOUD_TRUSTED_PROXIES=1, ALLOWED_HOSTS=["paddle.example.org"]):
        outside = Client().get("/readyz", HTTP_HOST="paddle.example.org", HTTP_X_FORWARDED_FOR="203.0.113.9")
        kubelet = Client().get("/readyz", HTTP_HOST=POD_HOST)
    assert outside.status_code == 404 and b"database" not in outside.content
    assert kubelet.status_code == 200
