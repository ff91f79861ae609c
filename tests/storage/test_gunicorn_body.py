"""Chunks through a real gunicorn (as `make run` and production serve the portal): its body fast path.

Under gunicorn, chunk bodies are read straight from the socket (storage.gunicorn_body.GunicornBody). A kept-alive
connection must stay in step: after a chunk that was read, refused after reading, or refused before
reading, the next request on the same connection must be parsed where it starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User

from accounts.models import issue_token
from datacenters.models import Datacenter
from tests.servers import portal
from tests.storage.conftest import CHUNK, HOME, checksum, recorded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def gunicorn(tmp_path: Path) -> Iterator[str]:
    # The production settings module, as `make run` serves the portal.
    with portal(tmp_path, settings="portal.settings") as url:
        yield url


def test_chunks_over_one_kept_alive_gunicorn_connection(
    gunicorn: str, alice: User, local_dc: Datacenter, home: Path
) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {issue_token(alice).key}"
    data = os.urandom(5 * CHUNK + 321)
    upload = session.post(
        f"{gunicorn}/api/v1/files/uploads",
        json={"path": f"{HOME}/g.bin", "size": len(data), "checksum": checksum(data), "chunk_size": CHUNK},
        timeout=30,
    ).json()
    url = f"{gunicorn}/api/v1/files/uploads/{upload['id']}/chunks"

    def put(index: int, body: bytes, digest: str) -> requests.Response:
        return session.put(f"{url}/{index}", data=body, headers={"X-Chunk-Checksum": digest}, timeout=30)

    pieces = [data[i * CHUNK : (i + 1) * CHUNK] for i in range(upload["chunks"])]
    assert put(0, pieces[0], checksum(pieces[0])).status_code == 200
    # Read whole, then refused: the connection goes on.
    assert put(1, pieces[1], checksum(b"other")).json()["code"] == "checksum_mismatch"
    # Refused before its body is read (wrong length): gunicorn skips the body, the connection goes on.
    assert put(2, pieces[2][:100], checksum(pieces[2][:100])).status_code == 400
    for index in range(1, upload["chunks"]):
        assert put(index, pieces[index], checksum(pieces[index])).status_code == 200
    done = session.post(f"{gunicorn}/api/v1/files/uploads/{upload['id']}/complete", timeout=30)
    assert done.status_code == 200, done.text
    assert (home / "g.bin").read_bytes() == data
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)

    # Downloads go out with sendfile under gunicorn: whole, and one range.
    download = f"{gunicorn}/api/v1/files/download"
    whole = session.get(download, params={"path": f"{HOME}/g.bin"}, timeout=30)
    assert whole.status_code == 200 and whole.content == data
    part = session.get(download, params={"path": f"{HOME}/g.bin"}, headers={"Range": "bytes=70000-70999"}, timeout=30)
    assert part.status_code == 206 and part.content == data[70000:71000]
    tail = session.get(download, params={"path": f"{HOME}/g.bin"}, headers={"Range": "bytes=-10"}, timeout=30)
    assert tail.content == data[-10:]
    session.close()
