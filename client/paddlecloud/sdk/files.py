"""The PFS through the portal's files API: every call to /api/v1/files/ is here or in `transfers` (one file).

`Files` lists, stats, makes and removes entries, and copies (`paddlectl file cp`), leaving each file's
resumable upload or download to `transfers.Transfers`. Copy semantics are the original paddlectl's
(`file put src dest`, and rsync's):
- `src` (a directory, no trailing slash) is copied as `dest/<basename of src>/...`;
- `src/` (trailing slash) copies what is inside src straight into `dest/`;
- a file goes to `dest/<name>` when dest ends with '/' or is a directory, else to `dest` itself.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from paddlecloud.sdk.errors import APIError, UsageProblem
from paddlecloud.sdk.session import Session
from paddlecloud.sdk.transfers import FILES, PART_SUFFIX, NoProgress, Progress, Summary, Transfers

# Never part of a job package: caches and version-control folders.
PACKAGE_SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".ipynb_checkpoints", ".mypy_cache",
                               ".pytest_cache"})
PACKAGE_SKIP_FILES = frozenset({".DS_Store"})
PACKAGE_SKIP_SUFFIXES = (".pyc", ".pyo", PART_SUFFIX)


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


class Files:
    """The PFS through the portal's files API, for one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.transfers = Transfers(session)

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
                self.transfers.upload_file(local, remote, progress, chunk_size, summary)
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
                summary.bytes += self.transfers.download_file(remote, local, progress)
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
