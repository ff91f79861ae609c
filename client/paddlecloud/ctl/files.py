"""The PFS file layer: every call to /api/v1/files/ is in this module (ls, stat, mkdir, rm, cp).

Uploads are chunked and resumable: a file is hashed (XXH3-128), an upload is started (or the open one
for the same path, size and checksum is found again), only the chunks the portal does not have are
sent, each with its own checksum, and `complete` verifies the whole file and moves it into place.
A second run after an interrupted one therefore sends only what is missing. Downloads stream to
`<name>.paddlectl-part` and resume with a Range request, guarded by the file's ETag.

Copy semantics are the original paddlectl's (`file put src dest`, and rsync's):
- `src` (a directory, no trailing slash) is copied as `dest/<basename of src>/...`;
- `src/` (trailing slash) copies what is inside src straight into `dest/`;
- a file goes to `dest/<name>` when dest ends with '/' or is a directory, else to `dest` itself.
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import xxhash

from paddlecloud.ctl.api import Session
from paddlecloud.ctl.errors import APIError, NetworkError, PaddleCloudError, UsageProblem

FILES = "/files"
HASH_PIECE = 4 * 1024 * 1024
DOWNLOAD_PIECE = 1024 * 1024
PART_SUFFIX = ".paddlectl-part"
CHECKSUM_PREFIX = "xxh3_128:"
# Never part of a job package: caches and version-control folders.
PACKAGE_SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".ipynb_checkpoints", ".mypy_cache",
                               ".pytest_cache"})
PACKAGE_SKIP_FILES = frozenset({".DS_Store"})
PACKAGE_SKIP_SUFFIXES = (".pyc", ".pyo", PART_SUFFIX)


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


def is_remote(path: str) -> bool:
    return path == "/pfs" or path.startswith("/pfs/")


def join(base: str, *names: str) -> str:
    parts = [base.rstrip("/")] + [n.strip("/") for n in names if n.strip("/")]
    return "/".join(parts) or "/"


def nfc(name: str) -> str:
    # macOS names are decomposed (NFD); the portal stores names composed (NFC) and refuses others.
    return unicodedata.normalize("NFC", name)


def check_remote(path: str, session: Session | None = None) -> str:
    """A remote path as the portal wants it: absolute under /pfs/, no '.' or '..' segments."""
    home = f" (yours: {session.home}/)" if session is not None else ""
    if not is_remote(path):
        raise UsageProblem(f"{path!r} is not a PFS path; PFS paths start with /pfs/<datacenter>/home/<user>/{home}")
    parts = [p for p in path.split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise UsageProblem(f"{path!r}: '{part}' segments are not allowed; give the path from /pfs/ down")
    cleaned = "/" + "/".join(nfc(p) for p in parts)
    return cleaned + ("/" if path.endswith("/") and cleaned != "/" else "")


def xxh3_file(path: Path) -> str:
    hasher = xxhash.xxh3_128()
    with path.open("rb") as handle:
        while piece := handle.read(HASH_PIECE):
            hasher.update(piece)
    return CHECKSUM_PREFIX + hasher.hexdigest()


def xxh3_bytes(data: bytes) -> str:
    return CHECKSUM_PREFIX + xxhash.xxh3_128_hexdigest(data)


def _indexes(spans: Iterable[Iterable[int]]) -> list[int]:
    out: list[int] = []
    for span in spans:
        start, stop = list(span)
        out.extend(range(start, stop))
    return out


class Files:
    """The PFS through the portal's files API, for one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._open_uploads: dict[str, list[dict[str, Any]]] | None = None

    # --- simple operations ----------------------------------------------------------------

    def stat(self, path: str) -> dict[str, Any] | None:
        """The entry at `path` ({path, name, kind, size, mtime}), or None if nothing is there."""
        response = self.session.request("GET", f"{FILES}/stat", params={"path": path.rstrip("/") or "/"},
                                         allow=(404,))
        if response.status_code == 404:
            return None
        data: dict[str, Any] = self.session.json(response)
        return data

    def ls(self, path: str, recursive: bool = False) -> Iterator[dict[str, Any]]:
        params = {"path": path.rstrip("/") or "/", "recursive": "true" if recursive else "false"}
        yield from self.session.paginate(f"{FILES}/ls", params)

    def mkdir(self, path: str, parents: bool = True) -> tuple[dict[str, Any], bool]:
        """Create a directory; (entry, created). With parents, an existing directory is fine."""
        response = self.session.request("POST", f"{FILES}/mkdir", json={"path": path.rstrip("/"), "parents": parents})
        return self.session.json(response), response.status_code == 201

    def rm(self, path: str, recursive: bool = False) -> dict[str, Any]:
        response = self.session.request("POST", f"{FILES}/rm", json={"path": path.rstrip("/"), "recursive": recursive})
        data: dict[str, Any] = self.session.json(response)
        return data

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

    def _begin(self, remote: str, size: int, checksum: str, chunk_size: int | None) -> tuple[dict[str, Any], bool]:
        """(upload with its chunk report, resumed): the open upload of this very file, else a new one."""
        resumed: dict[str, Any] | None = None
        for upload in self._open_uploads_for(remote):
            same = upload["size"] == size and upload["checksum"] == checksum
            if same and (chunk_size is None or upload["chunk_size"] == chunk_size) and resumed is None:
                resumed = upload
            else:
                # An older attempt at a different version of the file: it only holds quota; let it go.
                self.session.request("DELETE", f"{FILES}/uploads/{upload['id']}", allow=(404, 409))
        if resumed is not None:
            status = self._status(resumed["id"])
            if status["state"] == "open":
                return status, True
        body: dict[str, Any] = {"path": remote, "size": size, "checksum": checksum}
        if chunk_size:
            body["chunk_size"] = chunk_size
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
        checksum = xxh3_file(local)
        upload, resumed = self._begin(remote, size, checksum, chunk_size)
        try:
            self._send_missing(local, upload, progress, summary, resumed)
            self._complete(local, upload, progress, summary)
        except NetworkError as exc:
            raise NetworkError(
                f"{exc}; the upload of {remote} stopped: run the same command again to resume it "
                "(chunks already sent are kept for a day)"
            ) from None
        summary.files += 1
        summary.bytes += size
        if resumed:
            summary.resumed_files += 1
        if self._open_uploads is not None:
            self._open_uploads.pop(remote, None)
        return summary

    def _send_missing(
        self, local: Path, upload: dict[str, Any], progress: Progress, summary: Summary, resumed: bool
    ) -> None:
        chunk, total, size = int(upload["chunk_size"]), int(upload["chunks"]), int(upload["size"])
        todo = sorted(set(_indexes(upload.get("missing", []))) | set(_indexes(upload.get("wrong", []))))
        have = total - len(todo)
        if resumed and have:
            progress.note(f"resuming {upload['path']}: {have} of {total} chunks are already on the portal")
        already = sum(min(chunk, size - i * chunk) for i in range(total) if i not in set(todo))
        progress.advance(already)
        summary.chunks_reused += have
        with local.open("rb") as handle:
            for index in todo:
                handle.seek(index * chunk)
                data = handle.read(min(chunk, size - index * chunk))
                self._put_chunk(upload, index, data)
                summary.chunks_sent += 1
                progress.advance(len(data))

    def _put_chunk(self, upload: dict[str, Any], index: int, data: bytes) -> None:
        import tenacity  # noqa: PLC0415 - here, not at the top: it costs `paddlectl --help` ~25 ms

        headers = {"X-Chunk-Checksum": xxh3_bytes(data), "Content-Type": "application/octet-stream"}
        # A chunk damaged on the way is refused by its checksum: send it again (3 times in all).
        sending = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(3),
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, APIError) and e.code == "checksum_mismatch"),
            reraise=True,
        )
        url = f"{FILES}/uploads/{upload['id']}/chunks/{index}"
        sending(self.session.request, "PUT", url, data=data, headers=headers)

    def _complete(self, local: Path, upload: dict[str, Any], progress: Progress, summary: Summary) -> None:
        for _ in range(3):
            try:
                response = self.session.request("POST", f"{FILES}/uploads/{upload['id']}/complete")
            except APIError as exc:
                if exc.code != "incomplete":
                    raise
                # Chunks went missing (the temp file was damaged?): send them again and retry.
                status = self._status(upload["id"])
                self._send_missing(local, status, NoProgress(), summary, resumed=False)
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

    # --- copy -----------------------------------------------------------------------------

    def copy(
        self,
        sources: list[str],
        dest: str,
        progress: Progress | None = None,
        chunk_size: int | None = None,
        package: bool = False,
    ) -> Summary:
        """`paddlectl file cp SRC... DEST`: upload (local -> /pfs) or download (/pfs -> local)."""
        progress = progress or NoProgress()
        if not sources:
            raise UsageProblem("give at least one SRC and a DEST")
        remote_sources = [is_remote(s) for s in sources]
        if any(remote_sources) and not all(remote_sources):
            raise UsageProblem("the sources must all be local or all be /pfs/ paths")
        if all(remote_sources) and is_remote(dest):
            raise UsageProblem("copying from /pfs/ to /pfs/ is not supported; download and upload instead")
        if not any(remote_sources) and not is_remote(dest):
            raise UsageProblem(f"one side must be a /pfs/ path (yours start with {self.session.home}/)")
        if is_remote(dest):
            return self._upload(sources, check_remote(dest, self.session), progress, chunk_size, package)
        return self._download([check_remote(s, self.session) for s in sources], dest, progress)

    def _upload(
        self, sources: list[str], dest: str, progress: Progress, chunk_size: int | None, package: bool
    ) -> Summary:
        plan: list[tuple[Path, str]] = []
        dirs: list[str] = []
        summary = Summary()
        looked_up: list[dict[str, Any] | None] = []

        def dest_kind() -> str | None:
            if not looked_up:
                looked_up.append(self.stat(dest))
            entry = looked_up[0]
            return str(entry["kind"]) if entry else None

        for source in sources:
            path = Path(source).expanduser()
            if not path.exists():
                raise UsageProblem(f"{source}: no such file or directory")
            if path.is_dir():
                if dest_kind() not in (None, "dir"):
                    raise UsageProblem(f"{dest.rstrip('/')} is a file; a directory cannot be copied onto it")
                contents = source.endswith(("/", os.sep))
                base = dest if contents else join(dest, nfc(path.resolve().name))
                files, empty = _walk(path, package, summary)
                plan.extend((local, join(base, rel)) for local, rel in files)
                dirs.extend(join(base, rel) for rel in empty)
                if not files and not empty:
                    dirs.append(base.rstrip("/"))
            elif path.is_file():
                name = nfc(path.name)
                into = dest.endswith("/") or len(sources) > 1 or dest_kind() == "dir"
                plan.append((path, join(dest, name) if into else dest.rstrip("/")))
            else:
                raise UsageProblem(f"{source}: not a regular file or directory")
        self._send(plan, dirs, progress, chunk_size, summary)
        return summary

    def _send(
        self,
        plan: list[tuple[Path, str]],
        dirs: list[str],
        progress: Progress,
        chunk_size: int | None,
        summary: Summary,
    ) -> None:
        """Make the directories `dirs`, then upload each (local, remote) of `plan`."""
        total = sum(local.stat().st_size for local, _ in plan)
        progress.start(total, len(plan), "uploading")
        try:
            for remote in dirs:
                self.mkdir(remote, parents=True)
                summary.directories += 1
            for local, remote in plan:
                progress.file(remote)
                self.upload_file(local, remote, progress, chunk_size, summary)
        finally:
            progress.finish()

    def _download(self, sources: list[str], dest: str, progress: Progress) -> Summary:
        summary = Summary()
        plan: list[tuple[str, Path, int]] = []
        local_dirs: list[Path] = []
        target = Path(dest).expanduser()
        for source in sources:
            entry = self.stat(source)
            if entry is None:
                raise APIError(404, f"{source.rstrip('/')}: no such file or directory", "not_found")
            if entry["kind"] == "dir":
                base = target if source.endswith("/") else target / entry["name"]
                if base.exists() and not base.is_dir():
                    raise UsageProblem(f"{base} is a file; a directory cannot be copied onto it")
                local_dirs.append(base)
                prefix = entry["path"].rstrip("/") + "/"
                for item in self.ls(source, recursive=True):
                    rel = item["path"][len(prefix):] if item["path"].startswith(prefix) else item["name"]
                    local = base.joinpath(*PurePosixPath(rel).parts)
                    if item["kind"] == "dir":
                        local_dirs.append(local)
                    elif item["kind"] == "file":
                        plan.append((item["path"], local, int(item["size"])))
                    else:
                        summary.skipped.append(f"{item['path']} ({item['kind']})")
            elif entry["kind"] == "file":
                into = dest.endswith(("/", os.sep)) or target.is_dir() or len(sources) > 1
                plan.append((entry["path"], target / entry["name"] if into else target, int(entry["size"])))
            else:
                raise UsageProblem(f"{source} is a {entry['kind']}, not a file or directory")
        self._receive(plan, local_dirs, progress, summary)
        return summary

    def _receive(
        self, plan: list[tuple[str, Path, int]], local_dirs: list[Path], progress: Progress, summary: Summary
    ) -> None:
        """Make the directories `local_dirs`, then download each (remote, local, size) of `plan`."""
        progress.start(sum(size for _, _, size in plan), len(plan), "downloading")
        try:
            for directory in local_dirs:
                directory.mkdir(parents=True, exist_ok=True)
                summary.directories += 1
            for remote, local, _ in plan:
                progress.file(remote)
                summary.bytes += self.download_file(remote, local, progress)
                summary.files += 1
        finally:
            progress.finish()


def _walk(root: Path, package: bool, summary: Summary) -> tuple[list[tuple[Path, str]], list[str]]:
    """(files as (local path, relative posix name)), empty directories) under root, sorted."""
    files: list[tuple[Path, str]] = []
    empty: list[str] = []
    for current, dirnames, filenames in os.walk(root):
        here = Path(current)
        rel_dir = here.relative_to(root)
        kept_dirs = []
        for name in sorted(dirnames):
            if package and name in PACKAGE_SKIP_DIRS:
                continue
            if (here / name).is_symlink():
                summary.skipped.append(f"{here / name} (a symlink to a directory)")
                continue
            kept_dirs.append(name)
        dirnames[:] = kept_dirs
        kept_files = []
        for name in sorted(filenames):
            if package and (name in PACKAGE_SKIP_FILES or name.endswith(PACKAGE_SKIP_SUFFIXES)):
                continue
            if not (here / name).is_file():
                summary.skipped.append(f"{here / name} (not a regular file)")
                continue
            kept_files.append(name)
        for name in kept_files:
            files.append((here / name, nfc((rel_dir / name).as_posix())))
        if not kept_files and not kept_dirs and rel_dir != Path():
            empty.append(nfc(rel_dir.as_posix()))
    return files, empty
