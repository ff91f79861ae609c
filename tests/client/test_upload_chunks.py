"""paddlectl's upload of one file (sdk/transfers.py, sdk/upload_chunks.py) against a real HTTP server on loopback.

The server plays the portal's upload API: it answers start and complete, reads each chunk's body in
1 MiB pieces and checks its XXH3-128 against X-Chunk-Checksum, as the portal does; tests make it wait
for chunks to overlap, or change the local file mid-upload.
"""

from __future__ import annotations

import json
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import xxhash
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.session import Session
from paddlecloud.sdk.transfers import Transfers
from paddlecloud.sdk.upload_chunks import (
    MIB,
    ChunkBody,
    FileChanged,
    auto_chunk_size,
    hash_file,
)

from tests.client.conftest import serving

KIB = 1024


def digest(data: bytes) -> str:
    return f"xxh3_128:{xxhash.xxh3_128_hexdigest(data)}"


class UploadPortal:
    """The upload API of one portal holding one upload: chunks are checked and kept by index."""

    def __init__(self) -> None:
        self.upload: dict[str, Any] = {}
        self.chunks: dict[int, bytes] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self.hold: Callable[[], object] = lambda: None  # every PUT calls it before reading its body
        self.on_start: Callable[[], object] = lambda: None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.portal = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self, asked: dict[str, Any]) -> dict[str, Any]:
        chunk = asked.get("chunk_size", 256 * KIB)
        count = -(-asked["size"] // chunk)
        self.upload = {
            "id": "u1", "path": asked["path"], "size": asked["size"], "checksum": asked["checksum"],
            "chunk_size": chunk, "chunks": count, "state": "open", "missing": [[0, count]], "wrong": [],
        }
        self.on_start()
        return self.upload

    def counting(self, step: int) -> None:
        with self.lock:
            self.in_flight += step
            self.most_in_flight = max(self.most_in_flight, self.in_flight)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections, as gunicorn's

    @property
    def portal(self) -> UploadPortal:
        return self.server.portal  # type: ignore[attr-defined,no-any-return]

    def do_GET(self) -> None:
        self._send(200, {"results": [], "next": None})  # no open uploads

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/complete"):
            self._send(200, {"state": "completed"})
        else:
            self._send(201, self.portal.start(json.loads(body)))

    def do_PUT(self) -> None:
        self.portal.counting(1)
        try:
            self.portal.hold()  # BrokenBarrierError (a 500 to the client) unless chunks come together
            self._put()
        finally:
            self.portal.counting(-1)

    def _put(self) -> None:
        index = int(self.path.rsplit("/", 1)[1])
        length = left = int(self.headers["Content-Length"])
        hasher, kept = xxhash.xxh3_128(), []
        while left:
            piece = self.rfile.read(min(MIB, left))
            hasher.update(piece)
            if length <= MIB:  # big chunks are not kept: the test of memory measures this side too
                kept.append(piece)
            left -= len(piece)
        if f"xxh3_128:{hasher.hexdigest()}" != self.headers["X-Chunk-Checksum"]:
            self._send(400, {"detail": f"chunk {index} arrived damaged", "code": "checksum_mismatch"})
            return
        self.portal.chunks[index] = b"".join(kept)
        self._send(200, {"index": index})

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def portal() -> Iterator[UploadPortal]:
    p = UploadPortal()
    with serving(p.server):
        yield p


@pytest.fixture
def session(portal: UploadPortal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("PADDLECTL_RETRIES", "0")
    entry = configfile.Datacenter(name="dc", username="alice", endpoint=portal.url, password="pw", portal_name="dc")
    cache = configfile.TokenCache(portal.url, "alice", directory=tmp_path)
    cache.write("t0k3n", None)
    return Session(entry, token_cache=cache, timeout=20)


def test_the_file_and_each_chunk_are_hashed_in_one_read(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5000  # 1,280,000 bytes: 4 chunks of 320 KiB, the last one short
    local = tmp_path / "data.bin"
    local.write_bytes(data)
    chunk = 320 * KIB
    hashes = hash_file(local, chunk)
    assert hashes.whole == digest(data)
    assert list(hashes.chunks) == [digest(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    assert hash_file(local).chunks == () and hash_file(local).whole == digest(data)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert hash_file(empty, chunk).chunks == () and hash_file(empty, chunk).whole == digest(b"")


def test_a_chunk_body_is_read_a_mebibyte_at_a_time_and_starts_again_after_its_end(tmp_path: Path) -> None:
    data = bytes(range(256)) * (16 * KIB)  # 4 MiB
    local = tmp_path / "data.bin"
    local.write_bytes(data)
    with local.open("rb") as handle:
        body = ChunkBody(handle.fileno(), 100, 3 * MIB + 5, str(local))
        for _ in range(2):  # a second sending (after a login) reads it whole again
            pieces = []
            while piece := body.read(16 * KIB):  # urllib3 asks for 16 KiB; a whole piece comes
                pieces.append(bytes(piece))
            assert [len(p) for p in pieces] == [MIB, MIB, MIB, 5]
            assert b"".join(pieces) == data[100 : 100 + 3 * MIB + 5] and len(body) == 3 * MIB + 5


def test_the_chunk_size_asked_is_large_but_leaves_every_connection_a_chunk() -> None:
    assert auto_chunk_size(2 * 1024 * MIB, 4) == 64 * MIB  # the portal's default largest chunk
    assert auto_chunk_size(100 * MIB, 4) == 25 * MIB
    assert auto_chunk_size(100 * MIB + 1, 4) % (64 * KIB) == 0  # the portal's alignment
    assert auto_chunk_size(5, 4) == 8 * MIB  # never below the portal's default chunk


def test_chunks_are_sent_several_at_once(portal: UploadPortal, session: Session, tmp_path: Path) -> None:
    data = bytes(range(256)) * (4 * KIB * 7)  # 7 MiB: 7 chunks of 1 MiB
    local = tmp_path / "data.bin"
    local.write_bytes(data)
    together = threading.Barrier(3, timeout=10)
    held = iter(range(3))
    portal.hold = lambda: together.wait() if next(held, None) is not None else None  # the first 3 wait for each other
    summary = Transfers(session, parallel=4).upload_file(local, "/pfs/dc/home/alice/data.bin", chunk_size=MIB)
    assert summary.chunks_sent == 7 and portal.most_in_flight >= 3
    assert b"".join(portal.chunks[i] for i in range(7)) == data


def test_memory_stays_flat_with_the_chunk_size(portal: UploadPortal, session: Session, tmp_path: Path) -> None:
    local = tmp_path / "big.bin"
    with local.open("wb") as handle:
        for _ in range(64):
            handle.write(bytes(range(256)) * (4 * KIB))  # 64 MiB
    tracemalloc.start()
    try:
        summary = Transfers(session).upload_file(local, "/pfs/dc/home/alice/big.bin", chunk_size=64 * MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.chunks_sent == 1
    assert peak < 16 * MIB, f"{peak / MIB:.0f} MiB held for a 64 MiB chunk"  # the portal's side reads 1 MiB pieces


def test_a_file_that_changes_after_it_was_hashed_is_named(
    portal: UploadPortal, session: Session, tmp_path: Path
) -> None:
    local = tmp_path / "data.bin"
    local.write_bytes(b"a" * (3 * MIB))
    portal.on_start = lambda: local.write_bytes(b"b" * (3 * MIB))  # between hashing and sending
    with pytest.raises(FileChanged, match=r"data\.bin changed while it was being uploaded"):
        Transfers(session, parallel=1).upload_file(local, "/pfs/dc/home/alice/data.bin", chunk_size=MIB)
    assert not portal.chunks  # each chunk was refused once, not sent three times
