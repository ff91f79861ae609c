"""Logical PFS paths (/pfs/<dc>/home/<user>/..., /pfs/<dc>/public/...) checked and mapped onto storage.

The one place that decides who may touch which path. Every refusal names the rule it applies: a bad
path is a 400 on the field `path`, a path the user may not touch is a 403. Symlinks are resolved only
while they stay inside the area they start in (the user's home, or public); one that leads out is
refused, and at use time the backend opens every component with O_NOFOLLOW.

Also where a user's areas are on the host and inside a job (`places`, `prepare_dirs`): both engines
use them, as the local sandbox binds the same paths a pod mounts by hostPath.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecloud.contract.quantity import quote

from core.errors import Conflict, Forbidden, Invalid
from datacenters.models import Datacenter
from storage import backends
from storage import errors as storage_errors
from storage.backends import TEMP_PREFIX, PfsStorage, storage_for

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
HOME = "home"
PUBLIC = "public"
EXAMPLE = "/pfs/<datacenter>/home/<user>/... or /pfs/<datacenter>/public/..."
REPLACEMENT = "\ufffd"

# After the one decoding HTTP does, a '%2F' left in a name means the client encoded twice or is
# hiding a separator (or '.', '\\', NUL) from a check: refuse rather than guess.
_ENCODED = re.compile(r"%(2f|5c|2e|00)", re.IGNORECASE)


@dataclass(frozen=True)
class ResolvedPath:
    """A logical path the user may use, and where it is in the datacenter's storage."""

    datacenter: Datacenter
    logical: str  # normalized: /pfs/<dc>/<area>[/<owner>]/<parts...>
    area: str  # HOME or PUBLIC
    owner: Any  # the user whose home it is; None in public
    parts: tuple[str, ...]  # components below the area root
    name: str  # storage name relative to the storage root, symlinks inside the area resolved
    storage: PfsStorage

    @property
    def real(self) -> Path:
        """The absolute path on the portal's mount (the filesystem backend)."""
        return Path(self.storage.root_real(), self.name)

    @property
    def is_area_root(self) -> bool:
        return not self.parts

    @property
    def area_label(self) -> str:
        return "your home" if self.area == HOME else "public"

    def child(self, relative: str) -> str:
        return f"{self.logical}/{relative}" if relative else self.logical


def parse(path: Any, field: str = "path") -> list[str]:
    """Check a logical path's text and return its components after /pfs (400 naming the rule broken)."""
    problem = _text_problem(path)
    if problem:
        raise Invalid(problem, field)
    parts = [part for part in path.split("/") if part]
    if not parts or parts[0] != "pfs":
        raise Invalid(f"must start with /pfs/<datacenter>/ (got {quote(path, 80)})", field)
    if len(parts) < 3:
        raise Invalid(f"must name a datacenter and an area below it: {EXAMPLE} (got {quote(path, 80)})", field)
    for part in parts[1:]:
        problem = _name_problem(part)
        if problem:
            raise Invalid(problem, field)
    return parts[1:]


def _text_problem(path: Any) -> str | None:
    """What is wrong with a logical path's text as a whole, or None."""
    if not isinstance(path, str) or not path:
        return f"a path such as {EXAMPLE} is required"
    if "\x00" in path:
        return "must not contain NUL bytes"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode (lone surrogate)"
    if REPLACEMENT in path:
        # What the request's decoding leaves where bytes were not UTF-8 (%FF in a query string).
        return "is not valid UTF-8 (it holds U+FFFD where bytes did not decode); send paths UTF-8 encoded"
    if size > MAX_PATH_BYTES:
        return f"is {size} bytes long; the limit is {MAX_PATH_BYTES}"
    controls = sorted({c for c in path if unicodedata.category(c) == "Cc"})
    if controls:
        return f"must not contain control characters (found {', '.join(repr(c) for c in controls)})"
    if "\\" in path:
        return "must not contain backslashes; separate names with '/'"
    if not path.startswith("/"):
        return f"must be absolute, starting with /pfs/<datacenter>/ (got {quote(path, 80)})"
    return None


def _name_problem(part: str) -> str | None:
    """What is wrong with one name of a logical path after /pfs, or None."""
    if part in (".", ".."):
        return f"'{part}' segments are not allowed; give the path from /pfs/ down"
    if _ENCODED.search(part):
        return f"name {part[:80]!r} contains a percent-encoded '/', '\\', '.' or NUL; send the path decoded"
    length = len(part.encode("utf-8"))
    if length > MAX_NAME_BYTES:
        return f"name {part[:40]!r}... is {length} bytes long; the limit is {MAX_NAME_BYTES}"
    if not unicodedata.is_normalized("NFC", part):
        fixed = unicodedata.normalize("NFC", part)
        return f"name {part!r} is not in Unicode NFC form; use {fixed!r} (the same text, composed)"
    if part.startswith(TEMP_PREFIX):
        return f"names starting with {TEMP_PREFIX!r} are reserved for uploads in progress"
    return None


def home_logical(user: Any, datacenter: Datacenter) -> str:
    return f"/pfs/{datacenter.name}/{HOME}/{user.get_username()}"


def home_area(user: Any) -> str:
    return home_of(user.get_username())


def home_of(name: str) -> str:
    """`home/<name>`: the one rule for which user names can be a home directory."""
    if name in (".", "..") or "/" in name or not unicodedata.is_normalized("NFC", name) or len(name.encode()) > 255:
        raise Forbidden(f"the user name {name!r} cannot be a home directory; tell the operators")
    return f"{HOME}/{name}"


def public_name(datacenter: Datacenter) -> str:
    return "/".join(backends.split(datacenter.public_path)) or PUBLIC


def home_dir(user: Any, datacenter: Datacenter) -> Path:
    """The user's home on the portal's mount of the datacenter's storage, created on first use."""
    storage = storage_for(datacenter)
    name = home_area(user)
    try:
        storage.ensure_area(name)
        return Path(storage.root_real(), name)
    except backends.StorageUnavailable:
        raise storage_errors.StorageUnavailable() from None
    except OSError as exc:
        storage_errors.raise_os_error(exc, home_logical(user, datacenter))


def resolve(
    user: Any, path: Any, *, write: bool = False, follow_last: bool = True, field: str = "path"
) -> ResolvedPath:
    """Check that `user` may read (or write) the logical `path` and find it in storage.

    follow_last=False keeps a final symlink as is (removing or replacing the link, not its target).
    Refuses: malformed paths (400), datacenters the user may not use, other users' homes, writing
    public unless an operator, anything else under /pfs (403); symlinks leading out of the area (403).
    """
    parts = parse(path, field)
    dc_name = parts[0]
    datacenter = Datacenter.objects.usable_by(user).filter(name=dc_name).first()
    if datacenter is None:
        names = ", ".join(Datacenter.objects.usable_by(user).values_list("name", flat=True)) or "none"
        raise Forbidden(f"you may not use datacenter {dc_name!r}; you may use: {names}")
    home = home_logical(user, datacenter)
    public = f"/pfs/{datacenter.name}/{PUBLIC}"
    area = parts[1] if len(parts) > 1 else ""
    if area == HOME and len(parts) > 2 and parts[2] == user.get_username():
        owner, below, area_name = user, parts[3:], home_area(user)
        logical_root = home
    elif area == PUBLIC:
        if write and not may_write(user, PUBLIC):
            raise Forbidden(f"{public} is read-only; only operators write it")
        owner, below, area_name = None, parts[2:], public_name(datacenter)
        logical_root = public
    elif area == HOME and len(parts) > 2:
        raise Forbidden(
            f"/pfs/{dc_name}/{HOME}/{parts[2]} is another user's home; you may use only {home}"
        )
    else:
        raise Forbidden(f"paths must be under {home} or {public}")

    return _locate(datacenter, owner, area_name, logical_root, below, follow_last, "your home")


def may_write(user: Any, area: str) -> bool:
    """Everyone writes their own home; only operators write public."""
    return area == HOME or bool(user.is_staff)


def in_home(owner: Any, datacenter: Datacenter, below: Sequence[str], *, follow_last: bool = True) -> ResolvedPath:
    """A path below `owner`'s home for the portal's own use (a job's logs): `resolve` without a request.

    The same rules: symlinks are resolved only while they stay in the home; one leading out is a 403.
    """
    logical_root = home_logical(owner, datacenter)
    return _locate(datacenter, owner, home_area(owner), logical_root, list(below), follow_last, "the owner's home")


def _locate(
    datacenter: Datacenter,
    owner: Any,
    area_name: str,
    logical_root: str,
    below: list[str],
    follow_last: bool,
    home_label: str,
) -> ResolvedPath:
    storage = storage_for(datacenter)
    logical = "/".join([logical_root, *below])
    try:
        if owner is not None:
            storage.ensure_area(area_name)
        name = storage.resolve(area_name, below, follow_last=follow_last)
    except backends.StorageUnavailable:
        raise storage_errors.StorageUnavailable() from None
    except backends.SymlinkEscape as escape:
        where = "/".join([logical_root, *below[: escape.index + 1]])
        label = home_label if owner is not None else "public"
        message = f"{where} is a symlink that leads outside {label}; it is not followed"
        raise Forbidden(message) from None
    except OSError as exc:
        storage_errors.raise_os_error(exc, logical_root)
    return ResolvedPath(
        datacenter=datacenter,
        logical=logical,
        area=HOME if owner is not None else PUBLIC,
        owner=owner,
        parts=tuple(below),
        name=name,
        storage=storage,
    )


def refuse_normalization_clash(target: ResolvedPath, new_names: int) -> None:
    """409 if the first of the last `new_names` components of `target` (those about to be created)
    differs from an existing sibling only by Unicode normalization: two names that look the same."""
    if new_names <= 0:
        return
    parts = target.name.split("/")
    candidate = "/".join(parts[: len(parts) - new_names + 1])
    clash = target.storage.normalization_clash(candidate)
    if clash is not None:
        raise Conflict(
            f"{target.logical}: {candidate.rsplit('/', 1)[-1]!r} differs only by Unicode normalization "
            f"from the existing {clash!r}; rename one of them",
            code="normalization_clash",
        )


# --- a user's areas for a job -----------------------------------------------------------------


@dataclass(frozen=True)
class Places:
    """Where a user's storage is on the host and inside the job."""

    root: Path
    home: Path
    public: Path
    home_inside: str
    public_inside: str

    def inside(self, host_path: Path) -> str:
        """The path a job sees for ``host_path`` (a path in the user's home or the public area)."""
        for host, seen in ((self.home, self.home_inside), (self.public, self.public_inside)):
            if host_path == host or host in host_path.parents:
                return seen + "/" + str(host_path.relative_to(host)) if host_path != host else seen
        raise ValueError(f"{host_path} is neither in the user's home nor in the public area")


def places(datacenter: Datacenter, username: str) -> Places:
    root = Path(os.path.realpath(datacenter.storage_root))
    public = public_name(datacenter)
    home = home_of(username)  # refuses a name that cannot be a directory (".", "..", a slash)
    return Places(
        root=root,
        home=root / home,
        public=root / public,
        home_inside=f"/pfs/{datacenter.name}/{HOME}/{username}",
        public_inside=f"/pfs/{datacenter.name}/{public}",
    )


def job_dirs(where: Places, package: Path, *dirs: Path) -> list[Path]:
    """The folders a job writes, for prepare_dirs: its own (`dirs`), and its package where that lies in its owner's
    home (a job makes files beside its code: the data it downloads, the model it saves; an experiment's trials
    share one package folder, which is no trial's own job folder)."""
    return [*dirs, *([package] if package.is_relative_to(where.home) else [])]


def prepare_dirs(
    datacenter: Datacenter, where: Places, dirs: list[Path], runs_as_root: bool, owner: tuple[int, int]
) -> None:
    """Create ``dirs`` (in the user's home) without following links; as root, hand them and the
    home to the job's uid and gid (``owner``) so the job can write there. The
    job owns its home's contents, so each name is opened without following symlinks: a link it
    planted cannot turn this into a chown of a host path."""
    storage = storage_for(datacenter)
    names = [str(where.home.relative_to(where.root))]
    for directory in dirs:
        names.append(str(directory.relative_to(where.root)))
    uid, gid = owner
    for name in names:
        storage.makedirs(name)
        if not runs_as_root:
            continue
        parts = name.split("/")
        # Every directory from the home down, so each level of the job's folders is its own.
        for depth in range(2, len(parts) + 1):
            fd = storage.open_fd("/".join(parts[:depth]), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fchown(fd, uid, gid)
            finally:
                os.close(fd)
    storage.makedirs(str(where.public.relative_to(where.root)))
