"""The runtime image's Dockerfile: a base image, the user's package copied in, its requirements installed.

The one rule for that text: `paddlectl build` (on the user's machine) and the in-cluster builder
(Kaniko, images/) both write it with `runtime_dockerfile`. Entrypoint, command, PATH and the base's
USER stay as they are, so `paddlecloud-launch` starts jobs on the result as on the base.
"""

from __future__ import annotations

import re

DEFAULT_DEST = "/workspace/package"
REQUIREMENTS = "requirements.txt"
ROOT_USERS = frozenset({"", "0", "root", "0:0", "root:root"})
# USER and --chown take user[:group], each a name or a numeric id: nothing else goes into the Dockerfile.
_ID = r"(?:[0-9]{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,31})"
USER_PATTERN = re.compile(rf"{_ID}(?::{_ID})?")
USER_RULE = "must be user[:group], each a name ([A-Za-z_][A-Za-z0-9_.-], up to 32) or a numeric id"


def user_problem(user: str) -> str | None:
    """Why `user` cannot be a Dockerfile USER or --chown owner, or None ('' is the base's root)."""
    if user == "" or USER_PATTERN.fullmatch(user):
        return None
    return USER_RULE


def _checked(field: str, user: str | None) -> None:
    problem = None if user is None else user_problem(user)
    if problem:
        raise ValueError(f"{field} {user!r} {problem}")


def runtime_dockerfile(
    base_image: str,
    dest: str = DEFAULT_DEST,
    requirements: bool = False,
    *,
    source: str = ".",
    copy_owner: str | None = None,
    base_user: str | None = None,
) -> str:
    """The Dockerfile copying `source` (in the build context) to `dest`.

    `requirements`: the package has a requirements.txt at its top, pip-installed into the base's own
    Python environment, which root owns: so that one step runs as root and the base's user
    (`base_user`) comes back after it. `copy_owner` chowns the copied files (the in-cluster builder
    copies straight from the PFS, whose modes may hide them from the job's uid); without it the
    code is root's and read-only to the job. No RUN step without requirements: the image is the
    base plus one layer, and the build needs no shell and no network. A `base_user` or `copy_owner`
    that is not user[:group] (user_problem) raises ValueError: it would be a Dockerfile line of its own.
    """
    _checked("copy_owner", copy_owner)
    _checked("base_user", base_user)
    chown = f"--chown={copy_owner} " if copy_owner else ""
    lines = [f"FROM {base_image}", f"COPY {chown}{source} {dest}/", f"WORKDIR {dest}"]
    if requirements:
        # pip runs in DEST, so relative paths in requirements.txt resolve inside the package.
        install = f"RUN python -m pip install --no-cache-dir -r {dest}/{REQUIREMENTS}"
        restore = base_user is not None and base_user not in ROOT_USERS
        lines += ["USER root", install, f"USER {base_user}"] if restore else [install]
    return "\n".join(lines) + "\n"
