"""Where a user's PFS areas are, on the host and inside a job, and making a job's folders there.

Both engines use these: the local sandbox binds the same paths a pod mounts by hostPath.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from datacenters.models import Datacenter
from storage import paths
from storage.backends import storage_for


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
    public = paths.public_name(datacenter)
    home = paths.home_of(username)  # refuses a name that cannot be a directory (".", "..", a slash)
    return Places(
        root=root,
        home=root / home,
        public=root / public,
        home_inside=f"/pfs/{datacenter.name}/home/{username}",
        public_inside=f"/pfs/{datacenter.name}/{public}",
    )


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
