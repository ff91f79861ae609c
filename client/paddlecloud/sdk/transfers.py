"""One file up or down through the portal's files API, resumable both ways (`files.Files` copies many).

Uploads are chunked and resumable: a file and its chunks are hashed in one read (XXH3-128), an upload
is started (or the open one for the same path, size and checksum is found again), only the chunks the
portal does not have are sent, several at once, each with its own checksum (sdk.upload_chunks), and
`complete` verifies the whole file and moves it into place.
A second run after an interrupted one therefore sends only what is missing. Downloads stream to
`<name>.paddlectl-part` and resume with a Range request, guarded by the file's ETag.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from paddlecloud.sdk.errors import APIError, NetworkError, PaddleCloudError
from paddlecloud.sdk.session import Session
from paddlecloud.sdk.upload_chunks import ChunkSender, FileHashes, auto_chunk_size, hash_file, parallel_chunks

FILES = "/files"
DOWNLOAD_PIECE = 1024 * 1024
PART_SUFFIX = ".paddlectl-part"


class Progress(Protocol):
    """What a transfer reports; the CLI draws a bar, the SDK and tests use `NoProgress`."""

    def start(self, total_bytes: int, files: int, verb: str) -> None: ...

    def file(self, name: str) -> None: ...

    def advance(self, count: int) -> None: ...

    def note(self, text: str) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    def start(self, total_bytes: int, files: int, verb: str) -> None:
        pass

    def file(self, name: str) -> None:
        pass

    def advance(self, count: int) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass
class Summary:
    """What a copy did: files and bytes moved, and how much a resumed upload did not need to send."""

    files: int = 0
    bytes: int = 0
    directories: int = 0
    resumed_files: int = 0
    chunks_sent: int = 0
    chunks_reused: int = 0
    skipped: list[str] = field(default_factory=list)


def _indexes(spans: Iterable[Iterable[int]]) -> list[int]:
    out: list[int] = []
    for span in spans:
        start, stop = list(span)
        out.extend(range(start, stop))
    return out


class Transfers:
    """Uploads and downloads of single files for one session; it remembers the open uploads of a whole copy."""

    def __init__(self, session: Session, parallel: int | None = None) -> None:
        self.session = session
        self.parallel = parallel or parallel_chunks()
        self._open_uploads: dict[str, list[dict[str, Any]]] | None = None

    # --- uploads --------------------------------------------------------------------------

    def _open_uploads_for(self, remote: str) -> list[dict[str, Any]]:
        if self._open_uploads is None:
            # One listing for a whole copy, rather than one query per file.
            found: dict[str, list[dict[str, Any]]] = {}
            for upload in self.session.paginate(f"{FILES}/uploads", {"state": "open"}):
                found.setdefault(upload["path"], []).append(upload)
            self._open_uploads = found
        return self._open_uploads.get(remote, [])

    def _status(self, upload_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.session.get(f"{FILES}/uploads/{upload_id}")
        return data

    def _begin(self, remote: str, size: int, hashes: FileHashes, chunk_size: int | None) -> tuple[dict[str, Any], bool]:
        """(upload with its chunk report, resumed): the open upload of this very file, else a new one.

        chunk_size: the user's; without one any open upload of the file is resumed, and a new one asks
        for the size the file was hashed with (the portal's default if it refuses that size).
        """
        resumed: dict[str, Any] | None = None
        for upload in self._open_uploads_for(remote):
            same = upload["size"] == size and upload["checksum"] == hashes.whole
            if same and (chunk_size is None or upload["chunk_size"] == chunk_size) and resumed is None:
                resumed = upload
            else:
                # An older attempt at a different version of the file: it only holds quota; let it go.
                self.session.request("DELETE", f"{FILES}/uploads/{upload['id']}", allow=(404, 409))
        if resumed is not None:
            status = self._status(resumed["id"])
            if status["state"] == "open":
                return status, True
        body: dict[str, Any] = {"path": remote, "size": size, "checksum": hashes.whole}
        if hashes.chunk_size:
            body["chunk_size"] = hashes.chunk_size
        try:
            return self.session.post(f"{FILES}/uploads", body), False
        except APIError as exc:
            if chunk_size is not None or "chunk_size" not in exc.fields():
                raise
        # A portal whose largest chunk is below the size chosen here: its default serves.
        del body["chunk_size"]
        return self.session.post(f"{FILES}/uploads", body), False

    def upload_file(
        self,
        local: Path,
        remote: str,
        progress: Progress | None = None,
        chunk_size: int | None = None,
        summary: Summary | None = None,
    ) -> Summary:
        """Upload one file to `remote` (its full path), sending only the chunks the portal lacks."""
        progress = progress or NoProgress()
        summary = summary or Summary()
        size = local.stat().st_size
        hashes = hash_file(local, chunk_size or auto_chunk_size(size, self.parallel))
        upload, resumed = self._begin(remote, size, hashes, chunk_size)
        fd = os.open(local, os.O_RDONLY)
        try:
            sender = ChunkSender(self.session, fd, local, upload, hashes, self.parallel)
            self._send_missing(sender, upload, progress, summary, resumed)
            self._complete(sender, upload, summary)
        except NetworkError as exc:
            raise NetworkError(
                f"{exc}; the upload of {remote} stopped: run the same command again to resume it "
                "(chunks already sent are kept for a day)"
            ) from None
        finally:
            os.close(fd)
        summary.files += 1
        summary.bytes += size
        if resumed:
            summary.resumed_files += 1
        if self._open_uploads is not None:
            self._open_uploads.pop(remote, None)
        return summary

    def _send_missing(
        self, sender: ChunkSender, upload: dict[str, Any], progress: Progress, summary: Summary, resumed: bool
    ) -> None:
        total = int(upload["chunks"])
        todo = sorted(set(_indexes(upload.get("missing", []))) | set(_indexes(upload.get("wrong", []))))
        have = total - len(todo)
        if resumed and have:
            progress.note(f"resuming {upload['path']}: {have} of {total} chunks are already on the portal")
        missing = set(todo)
        progress.advance(sum(sender.length(i) for i in range(total) if i not in missing))
        summary.chunks_reused += have

        def sent(length: int) -> None:
            summary.chunks_sent += 1
            progress.advance(length)

        sender.send(todo, sent)

    def _complete(self, sender: ChunkSender, upload: dict[str, Any], summary: Summary) -> None:
        for _ in range(3):
            try:
                response = self.session.request("POST", f"{FILES}/uploads/{upload['id']}/complete")
            except APIError as exc:
                if exc.code != "incomplete":
                    raise
                # Chunks went missing (the temp file was damaged?): send them again and retry.
                status = self._status(upload["id"])
                self._send_missing(sender, status, NoProgress(), summary, resumed=False)
                continue
            answer = self.session.json(response)
            while answer.get("state") == "verifying":
                time.sleep(1)
                answer = self._status(upload["id"])
            if answer.get("state") != "completed":
                raise PaddleCloudError(f"upload of {upload['path']} {answer.get('state')}: {answer.get('error')}")
            return
        raise PaddleCloudError(f"upload of {upload['path']} could not be completed; run the command again")

    # --- downloads ------------------------------------------------------------------------

    def download_file(self, remote: str, local: Path, progress: Progress | None = None) -> int:
        """Download one file; an interrupted earlier run's `<local>.paddlectl-part` is resumed."""
        progress = progress or NoProgress()
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(local.name + PART_SUFFIX)
        meta = local.with_name(local.name + PART_SUFFIX + ".json")
        headers: dict[str, str] = {}
        offset = 0
        if part.exists() and meta.exists():
            try:
                etag = json.loads(meta.read_text())["etag"]
                offset = part.stat().st_size
                headers = {"Range": f"bytes={offset}-", "If-Range": etag}
            except (OSError, ValueError, KeyError):
                offset = 0
        response = self.session.request(
            "GET", f"{FILES}/download", params={"path": remote}, headers=headers, stream=True, allow=(416,)
        )
        try:
            if response.status_code == 416:  # the part is the whole file already
                response.close()
                part.replace(local)
                meta.unlink(missing_ok=True)
                size = local.stat().st_size
                progress.advance(size)
                return size
            if response.status_code != 206:
                offset = 0  # the file changed (or no part): start over
            meta.write_text(json.dumps({"etag": response.headers.get("ETag", "")}))
            progress.advance(offset)
            mode = "ab" if offset else "wb"
            with part.open(mode) as handle:
                for piece in response.iter_content(DOWNLOAD_PIECE):
                    try:
                        handle.write(piece)
                    except OSError as exc:
                        raise PaddleCloudError(f"cannot write {local}: {exc.strerror or exc}") from None
                    progress.advance(len(piece))
        except Exception as exc:
            import requests  # noqa: PLC0415 - loaded already: the download went through it

            if isinstance(exc, requests.exceptions.RequestException):
                raise NetworkError(
                    f"the download of {remote} stopped ({exc.__class__.__name__}); run the same command again "
                    "to resume it"
                ) from None
            raise
        finally:
            response.close()
        part.replace(local)
        meta.unlink(missing_ok=True)
        return local.stat().st_size
