"""A local file's upload chunks: hashed in the same read as the whole file, sent several at once, never whole in memory.

The whole-file checksum the portal needs before the first chunk and every chunk's checksum come from one
read of the file (`hash_file`). Chunks then go `parallel` at a time, each on its own connection, so the
portal hashes and writes one while the next arrives; each body is read from the file 1 MiB at a time
into one buffer (`ChunkBody`), so memory stays flat whatever the chunk or file size.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from paddlecloud.contract.checksum import written as written_checksum
from paddlecloud.sdk.errors import APIError, NetworkError, PaddleCloudError
from paddlecloud.sdk.session import MAX_RETRY_WAIT, RETRY_STATUSES, Session

MIB = 1024 * 1024
HASH_PIECE = 4 * MIB  # bytes per read while hashing
UPLOAD_PIECE = MIB  # bytes read from the file per sendall of a chunk's body
CHUNK_ALIGN = 64 * 1024  # the portal's rule: chunk sizes are multiples of 64 KiB
PREFERRED_CHUNK = 64 * MIB  # the portal's default largest chunk: one request per 64 MiB
MIN_AUTO_CHUNK = 8 * MIB  # the portal's default chunk: smaller ones cost more in requests than they spread
PARALLEL_CHUNKS = 4  # chunks in flight by default
MAX_PARALLEL = 16
DAMAGED_TRIES = 3  # a chunk the portal received damaged is sent this many times in all


class FileChanged(PaddleCloudError):
    """The local file changed (its bytes, or its length) while it was being uploaded."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} changed while it was being uploaded; run the command again when it is stable")


@dataclass(frozen=True)
class FileHashes:
    """A file's whole checksum and each `chunk_size` chunk's (none when chunk_size is 0)."""

    whole: str
    chunk_size: int
    chunks: tuple[str, ...]


def hash_file(path: Path, chunk_size: int = 0) -> FileHashes:
    """XXH3-128 of the whole file and of each of its `chunk_size` chunks, reading it once."""
    whole, chunk = xxhash.xxh3_128(), xxhash.xxh3_128()
    digests: list[str] = []
    buffer = memoryview(bytearray(HASH_PIECE))
    left = chunk_size  # bytes still to read of the current chunk
    with path.open("rb", buffering=0) as handle:
        while got := handle.readinto(buffer[: min(HASH_PIECE, left) if chunk_size else HASH_PIECE]):
            piece = buffer[:got]
            whole.update(piece)
            if chunk_size:
                chunk.update(piece)
                left -= got
                if not left:
                    digests.append(written_checksum(chunk.hexdigest()))
                    chunk.reset()
                    left = chunk_size
    if chunk_size and left != chunk_size:  # the last, shorter chunk
        digests.append(written_checksum(chunk.hexdigest()))
    return FileHashes(written_checksum(whole.hexdigest()), chunk_size, tuple(digests))


def hash_range(fd: int, offset: int, length: int) -> str | None:
    """XXH3-128 of `length` bytes of fd at `offset`; None if the file ends before them."""
    hasher = xxhash.xxh3_128()
    buffer = memoryview(bytearray(max(1, min(HASH_PIECE, length))))
    done = 0
    while done < length:
        got = os.preadv(fd, [buffer[: min(len(buffer), length - done)]], offset + done)
        if not got:
            return None
        hasher.update(buffer[:got])
        done += got
    return written_checksum(hasher.hexdigest())


class ChunkBody:
    """One chunk of a local file as a request body, read 1 MiB at a time into one buffer.

    requests takes Content-Length from len() and urllib3 sends each piece read() gives with one sendall
    before it asks for the next, so the buffer is reused. A body read to its end starts again at its
    first byte: the session sends the same body once more after logging in again.
    """

    def __init__(self, fd: int, offset: int, length: int, path: str) -> None:
        self.fd, self.offset, self.length, self.path = fd, offset, length, path
        self.sent = 0
        self.buffer = memoryview(bytearray(max(1, min(UPLOAD_PIECE, length))))

    def __len__(self) -> int:
        return self.length

    def read(self, size: int = -1, /) -> memoryview:
        if self.sent >= self.length:
            self.sent = 0  # the end of this sending; a next read() begins the next one
            return self.buffer[:0]
        want = min(len(self.buffer), self.length - self.sent)
        got = os.preadv(self.fd, [self.buffer[:want]], self.offset + self.sent)
        if not got:
            raise FileChanged(self.path)
        self.sent += got
        return self.buffer[:got]


def auto_chunk_size(size: int, parallel: int) -> int:
    """The chunk size asked for when the user chose none: large (fewer requests), but small enough that
    every connection gets a chunk; 64 KiB-aligned, between 8 and 64 MiB."""
    share = -(-size // max(1, parallel))
    aligned = -(-share // CHUNK_ALIGN) * CHUNK_ALIGN
    return max(MIN_AUTO_CHUNK, min(PREFERRED_CHUNK, aligned))


def parallel_chunks() -> int:
    """Chunks sent at once: $PADDLECTL_UPLOAD_PARALLEL (1 to 16), else 4."""
    try:
        return min(MAX_PARALLEL, max(1, int(os.environ.get("PADDLECTL_UPLOAD_PARALLEL", PARALLEL_CHUNKS))))
    except ValueError:
        return PARALLEL_CHUNKS


class ChunkSender:
    """Sends chunks of one open local file to one upload, `parallel` at a time, each with its checksum."""

    def __init__(
        self, session: Session, fd: int, local: Path, upload: dict[str, Any], hashes: FileHashes | None, parallel: int
    ) -> None:
        self.session, self.fd, self.path = session, fd, str(local)
        self.upload_id, self.size = upload["id"], int(upload["size"])
        self.chunk_size = int(upload["chunk_size"])
        # The checksums taken with the file's serve only when the portal's chunks are the same size.
        self.digests = hashes.chunks if hashes is not None and hashes.chunk_size == self.chunk_size else ()
        self.parallel = parallel

    def length(self, index: int) -> int:
        return min(self.chunk_size, self.size - index * self.chunk_size)

    def send(self, indexes: list[int], sent: Callable[[int], None]) -> None:
        """Send these chunks; `sent(length)` after each one the portal accepted (in this thread)."""
        if self.parallel == 1 or len(indexes) <= 1:
            for index in indexes:
                sent(self.put(index))
            return
        todo = iter(indexes)
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="paddlectl-chunk") as pool:
            # At most two chunks waiting per connection: queued work stays bounded for any file size.
            running: set[Future[int]] = {pool.submit(self.put, i) for i in itertools.islice(todo, 2 * self.parallel)}
            try:
                while running:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        sent(future.result())
                        running.update(pool.submit(self.put, i) for i in itertools.islice(todo, 1))
            finally:
                for future in running:
                    future.cancel()  # after a failure: those not started yet are not sent

    def put(self, index: int) -> int:
        """PUT chunk `index`; network failures and a restarting portal are retried as the session retries
        requests, a chunk damaged on the way is sent again (3 times in all). Its length when accepted."""
        offset, length = index * self.chunk_size, self.length(index)
        digest = self.digests[index] if index < len(self.digests) else self._digest(offset, length)
        headers = {"X-Chunk-Checksum": digest, "Content-Type": "application/octet-stream"}
        url = f"/files/uploads/{self.upload_id}/chunks/{index}"
        damaged = failures = 0
        while True:
            body: ChunkBody | bytes = ChunkBody(self.fd, offset, length, self.path) if length else b""
            try:
                self.session.request("PUT", url, data=body, headers=headers, retry=False)
                return length
            except APIError as exc:
                if exc.code == "checksum_mismatch":
                    damaged += 1
                    if self._digest(offset, length) != digest:
                        raise FileChanged(self.path) from None
                    if damaged < DAMAGED_TRIES:
                        continue
                if exc.status not in RETRY_STATUSES or failures >= self.session.retries:
                    raise
            except NetworkError:
                if failures >= self.session.retries:
                    raise
            time.sleep(min(MAX_RETRY_WAIT, self.session.retry_wait * 2**failures))
            failures += 1

    def _digest(self, offset: int, length: int) -> str:
        digest = hash_range(self.fd, offset, length)
        if digest is None:
            raise FileChanged(self.path)
        return digest
