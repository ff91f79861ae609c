"""A runtime image's build context: the trainer package copied under `package/`, a Dockerfile and a .dockerignore.

The Dockerfile is the original tools/build_docker.sh's: FROM the base image, COPY the package to
DEST, `pip install -r requirements.txt` when the package has one, WORKDIR DEST. It never sets the
entrypoint, the command, PATH or the environment, so PaddleCloud's runtime image (deploy/Dockerfile:
the /opt/paddle venv on PATH, `paddlecloud-launch`) works unchanged underneath. The base image's
USER is kept: COPY writes root-owned, world-readable files (code is read, not written, so no
--chown), and only the pip step runs as root (a venv owned by root is not writable by the base's
user), with USER set back to the base's user after it.

Every input is checked before anything is written: SRC a directory, no link leading out of it and
no special files, at most MAX_FILES files and MAX_BYTES bytes; DEST absolute without `..`.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from paddlecloud.contract.dockerfile import runtime_dockerfile
from paddlecloud.contract.imageref import image_problem
from paddlecloud.sdk.errors import UsageProblem

MAX_FILES = 10_000
MAX_BYTES = 1 << 30  # 1 GiB: data belongs on the PFS (paddlectl cp), not in an image
PACKAGE_DIR = "package"  # the copy of SRC inside the context
SKIPPED = frozenset({"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
DOCKERIGNORE = (
    "\n".join(
        ["# written by paddlectl build: never send caches or VCS folders to the builder"]
        + [f"{PACKAGE_DIR}/**/{name}" for name in sorted(SKIPPED)]
        + [f"{PACKAGE_DIR}/**/*{suffix}" for suffix in SKIPPED_SUFFIXES]
    )
    + "\n"
)
DEST_RE = re.compile(r"/[A-Za-z0-9._/-]{0,254}")


@dataclass(frozen=True)
class Package:
    """What scan() found in SRC: its files, folders and in-package links (relative), and their total size."""

    root: Path
    dirs: list[PurePosixPath]
    files: list[PurePosixPath]
    links: list[tuple[PurePosixPath, str]]
    total_bytes: int

    @property
    def has_requirements(self) -> bool:
        return PurePosixPath("requirements.txt") in self.files


def dest_problem(dest: str) -> str | None:
    """What is wrong with DEST (where the package goes in the image), or None."""
    if not DEST_RE.fullmatch(dest):
        return f"{dest!r} must be an absolute path of letters, digits and . _ - / (at most 255 characters)"
    parts = PurePosixPath(dest).parts
    if ".." in dest.split("/"):
        return f"{dest!r} must not contain '..'"
    if parts == ("/",):
        return f"{dest!r} must not be the image's root folder"
    return None


def check_inputs(dest: str, base_image: str, runtime_image: str) -> str:
    """Raise UsageProblem naming the argument at fault; return DEST without a trailing slash."""
    for name, problem in (
        ("DEST", dest_problem(dest)),
        ("BASE_IMAGE", image_problem(base_image)),
        ("RUNTIME_IMAGE", image_problem(runtime_image)),
    ):
        if problem:
            raise UsageProblem(f"{name}: {problem}")
    return dest.rstrip("/")


def _link_target(root: Path, link: Path) -> str:
    """The link's text when it stays inside root (relative, resolved lexically); else UsageProblem.

    Lexically, link by link: a chain through other links in the package (`s -> .`, `p -> s/s/..`) is
    not followed, so it may end outside; it is copied as links, and only ever resolves inside the
    image it is copied to (nothing of this machine is read through it)."""
    target = str(link.readlink())
    rel = link.relative_to(root)
    resolved = posixpath.normpath(f"{PurePosixPath(rel).parent}/{target}")  # lexical: nothing is followed
    if PurePosixPath(target).is_absolute() or resolved == ".." or resolved.startswith("../"):
        raise UsageProblem(f"SRC: {rel} is a link leading out of the package (to {target}); copy the file in instead")
    return target


def _skipped(name: str) -> bool:
    return name in SKIPPED or name.endswith(SKIPPED_SUFFIXES)


def scan(src: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> Package:
    """Walk SRC without following links, stopping as soon as a bound is passed."""
    if not src.is_dir():
        raise UsageProblem(f"SRC: {src} is not a directory (give the trainer package's folder)")
    root = src.resolve()
    found = Package(root, [], [], [], 0)
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk never follows links by default
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
        for name in [*dirnames, *sorted(filenames)]:
            if _skipped(name):
                continue
            path = here / name
            rel = PurePosixPath(path.relative_to(root).as_posix())
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found.links.append((rel, _link_target(root, path)))
            elif stat.S_ISDIR(mode):
                found.dirs.append(rel)
            elif stat.S_ISREG(mode):
                found.files.append(rel)
                total += path.lstat().st_size
            else:
                raise UsageProblem(f"SRC: {rel} is not a regular file, folder or link")
            if len(found.files) + len(found.dirs) + len(found.links) > max_files:
                raise UsageProblem(f"SRC: more than {max_files} files; keep data on the PFS, not in the image")
            if total > max_bytes:
                raise UsageProblem(f"SRC: more than {max_bytes >> 20} MiB; keep data on the PFS, not in the image")
    return Package(root, found.dirs, found.files, found.links, total)


def write_context(package: Package, context: Path, base_image: str, dest: str, base_user: str | None) -> Path:
    """Copy the scanned package to context/package (modes made world-readable) and write the Dockerfile."""
    if context.exists() and (context.is_symlink() or not context.is_dir() or any(context.iterdir())):
        raise UsageProblem(f"--context: {context} must be a new or empty folder")
    target = context / PACKAGE_DIR
    target.mkdir(parents=True)
    for directory in [target, *(target / rel for rel in package.dirs)]:
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)
    for rel in package.files:
        copied = Path(shutil.copyfile(package.root / rel, target / rel, follow_symlinks=False))
        executable = (package.root / rel).lstat().st_mode & stat.S_IXUSR
        copied.chmod(0o755 if executable else 0o644)
    for rel, link in package.links:
        (target / rel).symlink_to(link)
    (context / "Dockerfile").write_text(
        runtime_dockerfile(base_image, dest, package.has_requirements, source=f"{PACKAGE_DIR}/", base_user=base_user)
    )
    (context / ".dockerignore").write_text(DOCKERIGNORE)
    return context
