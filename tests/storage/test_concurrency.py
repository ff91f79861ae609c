"""Real HTTP against a live server: parallel chunks, a cut connection, two uploads racing for one path."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django.fixtures import Settings
from pytest_django.live_server_helper import LiveServer

from accounts.models import issue_token
from datacenters.models import Datacenter, Quota
from storage import uploads
from storage.models import Upload
from storage.tasks import cleanup_uploads
from tests.storage.conftest import CHUNK, HOME, checksum, recorded, temp_files
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class Client:
    """A minimal upload client over real HTTP, as paddlectl would do it."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def start(self, path: str, data: bytes) -> dict[str, Any]:
        response = self.session.post(
            f"{self.base}/api/v1/files/uploads",
            json={"path": path, "size": len(data), "checksum": checksum(data), "chunk_size": CHUNK},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return dict(response.json())

    def put(self, upload: dict[str, Any], index: int, data: bytes) -> requests.Response:
        piece = data[index * CHUNK : (index + 1) * CHUNK]
        # Each thread its own connection: requests' Session is not meant to be shared across threads.
        return requests.put(
            f"{self.base}/api/v1/files/uploads/{upload['id']}/chunks/{index}",
            data=piece,
            headers={
                **self.session.headers,
                "X-Chunk-Checksum": checksum(piece),
                "Content-Type": "application/octet-stream",
            },
            timeout=30,
        )

    def status(self, upload: dict[str, Any]) -> dict[str, Any]:
        return dict(self.session.get(f"{self.base}/api/v1/files/uploads/{upload['id']}", timeout=30).json())

    def complete(self, upload: dict[str, Any]) -> requests.Response:
        return requests.post(
            f"{self.base}/api/v1/files/uploads/{upload['id']}/complete", headers=dict(self.session.headers), timeout=60
        )


def _settle() -> None:
    """Wait for the test server's request threads to end.

    A request thread closes its database connection when its HTTP connection ends; one still open
    when the test database is dropped (on PostgreSQL) makes the drop fail.
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        busy = [t for t in threading.enumerate() if "process_request_thread" in t.name]
        if not busy:
            return
        time.sleep(0.02)


@pytest.fixture
def clients() -> Iterator[list[Client]]:
    made: list[Client] = []
    yield made
    for client in made:
        client.session.close()
    _settle()


@pytest.fixture
def connect(live_server: LiveServer, clients: list[Client]) -> Callable[[User], Client]:
    def make(user: User) -> Client:
        client = Client(live_server.url, issue_token(user).key)
        clients.append(client)
        return client

    return make


@pytest.fixture
def client(connect: Callable[[User], Client], alice: User, local_dc: Datacenter, home: Path) -> Client:
    return connect(alice)


def _parallel(jobs: Sequence[Callable[[], Any]], workers: int = 8) -> list[Any]:
    with ThreadPoolExecutor(workers) as pool:
        return [future.result() for future in [pool.submit(job) for job in jobs]]


def _put_status(client: Client, upload: dict[str, Any], index: int, data: bytes) -> int:
    return client.put(upload, index, data).status_code


def test_parallel_chunks_in_any_order_make_the_file(
    client: Client, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(24 * CHUNK + 999)
    upload = client.start(f"{HOME}/parallel.bin", data)
    order = list(range(upload["chunks"]))[::-1]
    results = _parallel([functools.partial(_put_status, client, upload, i, data) for i in order])
    assert results == [200] * len(order)
    assert client.complete(upload).status_code == 200
    assert checksum((home / "parallel.bin").read_bytes()) == checksum(data)
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)


def _cut_chunk(client: Client, upload: dict[str, Any], index: int, data: bytes) -> None:
    """Send chunk `index` with its full Content-Length but only half its bytes, then drop the connection."""
    piece = data[index * CHUNK : (index + 1) * CHUNK]
    url = urlparse(client.base)
    token = str(client.session.headers["Authorization"])
    with socket.create_connection((url.hostname, url.port)) as sock:
        head = (
            f"PUT /api/v1/files/uploads/{upload['id']}/chunks/{index} HTTP/1.1\r\n"
            f"Host: {url.hostname}\r\nAuthorization: {token}\r\nContent-Type: application/octet-stream\r\n"
            f"X-Chunk-Checksum: {checksum(piece)}\r\nContent-Length: {len(piece)}\r\n\r\n"
        )
        sock.sendall(head.encode() + piece[: len(piece) // 2])
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        with contextlib.suppress(OSError):
            sock.recv(65536)  # wait until the server has dealt with the cut body


def test_an_upload_cut_at_half_resumes_to_a_byte_identical_file(
    client: Client, connect: Callable[[User], Client], alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(7 * CHUNK)  # 50% is 3.5 chunks
    upload = client.start(f"{HOME}/resumed.bin", data)
    for index in range(3):
        assert client.put(upload, index, data).status_code == 200
    _cut_chunk(client, upload, 3, data)

    # A new client process: it knows only the upload id, asks what is missing, sends just that.
    resumed = connect(alice)
    status = resumed.status(upload)
    assert status["present"] == [[0, 3]] and status["missing"] == [[3, 7]] and status["wrong"] == []
    missing = [i for a, b in status["missing"] for i in range(a, b)]
    assert _parallel([functools.partial(_put_status, resumed, upload, i, data) for i in missing]) == [200] * 4
    assert resumed.complete(upload).status_code == 200
    assert checksum((home / "resumed.bin").read_bytes()) == checksum(data)
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)
    assert temp_files(home) == []


def test_two_uploads_to_one_path_the_later_complete_wins(
    client: Client, alice: User, local_dc: Datacenter, home: Path
) -> None:
    first, second = os.urandom(6 * CHUNK), os.urandom(4 * CHUNK + 5)
    a = client.start(f"{HOME}/same.bin", first)
    b = client.start(f"{HOME}/same.bin", second)
    jobs = [functools.partial(_put_status, client, a, i, first) for i in range(a["chunks"])]
    jobs += [functools.partial(_put_status, client, b, i, second) for i in range(b["chunks"])]
    assert set(_parallel(jobs)) == {200}
    assert client.complete(a).status_code == 200
    assert (home / "same.bin").read_bytes() == first  # neither upload disturbed the other
    assert client.complete(b).status_code == 200
    assert (home / "same.bin").read_bytes() == second
    assert recorded(alice, local_dc) == (len(second), 1, 0, 0)
    assert temp_files(home) == []


def test_two_uploads_to_one_path_completed_at_once_leave_one_whole_file(
    client: Client, alice: User, local_dc: Datacenter, home: Path
) -> None:
    contents = [os.urandom(8 * CHUNK), os.urandom(5 * CHUNK + 1)]
    started = [client.start(f"{HOME}/race.bin", data) for data in contents]
    for upload, data in zip(started, contents, strict=True):
        assert set(
            _parallel([functools.partial(_put_status, client, upload, i, data) for i in range(upload["chunks"])])
        ) == {200}
    barrier = threading.Barrier(2)

    def complete(upload: dict[str, Any]) -> int:
        barrier.wait()
        return client.complete(upload).status_code

    assert _parallel([functools.partial(complete, u) for u in started], workers=2) == [200, 200]
    finished = sorted(Upload.objects.filter(path=f"{HOME}/race.bin"), key=attrgetter("finished_at"))
    winner = contents[[str(u["id"]) for u in started].index(str(finished[-1].id))]
    assert (home / "race.bin").read_bytes() == winner
    assert recorded(alice, local_dc) == (len(winner), 1, 0, 0)
    assert temp_files(home) == []


def test_concurrent_starts_cannot_together_pass_the_quota(
    client: Client, alice: User, local_dc: Datacenter, home: Path
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, storage="256Ki")
    data = os.urandom(3 * CHUNK)
    barrier = threading.Barrier(6)

    def start(index: int) -> int:
        barrier.wait()
        return client.session.post(
            f"{client.base}/api/v1/files/uploads",
            json={"path": f"{HOME}/f{index}", "size": len(data), "checksum": checksum(data), "chunk_size": CHUNK},
            timeout=60,
        ).status_code

    codes = _parallel([functools.partial(start, i) for i in range(6)], workers=6)
    assert sorted(codes) == [201, 413, 413, 413, 413, 413]
    assert recorded(alice, local_dc) == (0, 0, 3 * CHUNK, 1)


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A real Celery worker: large uploads are verified by the storage.verify_upload task."""
    process = start_worker(tmp_path)
    yield process
    process.stop()


def test_a_large_upload_is_verified_in_the_background(
    client: Client, alice: User, local_dc: Datacenter, home: Path, settings: Settings, worker: WorkerProcess
) -> None:
    settings.PADDLECLOUD_UPLOAD_VERIFY_INLINE = 0  # every upload is "large"
    data = os.urandom(3 * CHUNK)
    upload = client.start(f"{HOME}/bg.bin", data)
    for index in range(3):
        client.put(upload, index, data)
    accepted = client.complete(upload)
    assert accepted.status_code == 202 and accepted.json()["state"] in ("verifying", "completed")
    deadline = time.monotonic() + 30
    while client.status(upload)["state"] == "verifying" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.status(upload)["state"] == "completed"
    assert (home / "bg.bin").read_bytes() == data
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)


def test_a_verification_whose_worker_died_is_queued_again_by_the_sweep(
    client: Client, alice: User, local_dc: Datacenter, home: Path, worker: WorkerProcess
) -> None:
    data = os.urandom(3 * CHUNK)
    upload = client.start(f"{HOME}/orphan.bin", data)
    for index in range(3):
        client.put(upload, index, data)
    # complete() claimed it, then the process verifying it died: the row says verifying and nobody beats.
    Upload.objects.filter(pk=upload["id"]).update(state="verifying", updated_at=timezone.now() - uploads.VERIFY_STALE)
    cleanup_uploads.run()
    wait_for(lambda: client.status(upload)["state"] == "completed", "the upload to be verified", 30, watch=worker)
    assert (home / "orphan.bin").read_bytes() == data
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)
