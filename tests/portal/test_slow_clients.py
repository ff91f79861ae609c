"""Slow and idle clients do not silence the portal (issue 34): the web tier `make run` and the deploy start.

The portal under a real gunicorn with its own config (portal/gunicorn_conf.py: gevent workers, as make run
serves it). Before, 8 such connections held every web thread: another user's calls timed out for as long
as they were held. A bounded hang check, not a speed test: bob's calls must answer within HANG seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User

from accounts.models import issue_token
from datacenters.models import Datacenter
from portal import gunicorn_conf
from tests.servers import portal
from tests.wait import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

HANG = 5.0  # seconds: far above a quiet answer (tens of ms), far below "held until the clients let go"
SLOWLORIS = 64
DOWNLOADS = 16
PER_USER = 8


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes almost nothing
    sock.settimeout(30)
    sock.connect((host, int(port)))
    return sock


@contextmanager
def dribbling(url: str, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that send a header every second and never finish their request (no login at all)."""
    socks = [_connect(url) for _ in range(count)]
    stop = threading.Event()

    def dribble() -> None:
        for sock in socks:
            sock.sendall(b"GET /api/v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while not stop.wait(1):
            for sock in socks:
                with suppress(OSError):  # cut by the portal: what the header deadline is for
                    sock.sendall(b"X-Slow: 1\r\n")

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        yield socks
    finally:
        stop.set()
        dribbler.join(10)
        for sock in socks:
            sock.close()


def all_cut(socks: list[socket.socket]) -> bool:
    """Whether the portal has closed every one of `socks` (an answer before the close, a 400, is read past)."""
    for sock in socks:
        sock.settimeout(0.05)
        try:
            while sock.recv(1024):
                pass
        except TimeoutError:
            return False
        except OSError:
            pass  # reset: cut
    return True


def download(url: str, key: str, **headers: str) -> requests.Response:
    return requests.get(
        f"{url}/api/v1/files/download", params={"path": "/pfs/local/home/alice/big.bin"},
        headers={"Authorization": f"Token {key}", **headers}, timeout=HANG,
    )  # fmt: skip


def slowest_of_bobs_calls(url: str, key: str) -> float:
    """Seconds of bob's slowest call of 30, each of which must answer (not time out)."""
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    slowest = 0.0
    for _ in range(10):
        for path in ("/api/v1/version", "/api/v1/jobs", "/api/v1/files/list?path=/pfs/local/home/bob"):
            began = time.monotonic()
            answer = session.get(f"{url}{path}", timeout=HANG)
            slowest = max(slowest, time.monotonic() - began)
            assert answer.status_code in (200, 404), (path, answer.status_code, answer.text[:200])
    return slowest


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    with portal(tmp_path, processes=2, PADDLECLOUD_DOWNLOADS_PER_USER=str(PER_USER)) as url:
        yield url


def test_slowloris_and_unread_downloads_leave_other_users_answered(
    served: str, alice: User, bob: User, local_dc: Datacenter
) -> None:
    home = Path(local_dc.storage_root) / "home" / "alice"
    home.mkdir()
    with (home / "big.bin").open("wb") as big:
        big.truncate(64 << 20)  # 64 MiB: far more than the socket buffers take
    alice_key, bob_key = issue_token(alice).key, issue_token(bob).key
    request = (
        "GET /api/v1/files/download?path=/pfs/local/home/alice/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {alice_key}\r\n\r\n"
    ).encode()

    with dribbling(served, SLOWLORIS) as slow:
        # 16 downloads of 64 MiB that alice never reads past their first bytes.
        unread = [_connect(served) for _ in range(DOWNLOADS)]
        statuses = []
        for sock in unread:
            sock.sendall(request)
            statuses.append(sock.recv(12)[9:12])
        # Her bound, across both web processes: 8 held, the rest told why (429 with Retry-After).
        assert statuses.count(b"200") == PER_USER and statuses.count(b"429") == DOWNLOADS - PER_USER, statuses
        try:
            assert slowest_of_bobs_calls(served, bob_key) < HANG
            refused = download(served, alice_key)
            assert refused.status_code == 429 and "downloads at once" in refused.json()["detail"]
            assert refused.headers["Retry-After"] == "5"
        finally:
            for sock in unread:
                sock.close()

        # Closing the held downloads gives their slots back: alice downloads again.
        def downloads_again() -> bool:
            answer = download(served, alice_key, Range="bytes=0-9")
            return answer.status_code == 206 and answer.content == b"\0" * 10

        wait_for(downloads_again, "alice's closed downloads to give their slots back", 30)
        # The dribbling connections are cut at the header deadline (gunicorn_conf.KEEPALIVE), never held for good.
        wait_for(lambda: all_cut(slow), "the slow connections to be cut", gunicorn_conf.KEEPALIVE + 20)
