"""The runtime image's Dockerfile: a base image, the user's package copied in, its requirements installed.

The one rule for that text: `paddlectl build` (on the user's machine) and the in-cluster builder
(Kaniko, images/) both write it with `runtime_dockerfile`. Entrypoint, command, PATH and the base's
USER stay as they are, so `paddlecloud-launch` starts jobs on the result as on the base.
"""

from __future__ import annotations

DEFAULT_DEST = "/workspace/package"
REQUIREMENTS = "requirements.txt"
ROOT_USERS = frozenset({"", "0", "root", "0:0", "root:root"})


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
    base plus one layer, and the build needs no shell and no network.
    """
    chown = f"--chown={copy_owner} " if copy_owner else ""
    lines = [f"FROM {base_image}", f"COPY {chown}{source} {dest}/", f"WORKDIR {dest}"]
    if requirements:
        # pip runs in DEST, so relative paths in requirements.txt resolve inside the package.
        install = f"RUN python -m pip install --no-cache-dir -r {dest}/{REQUIREMENTS}"
        restore = base_user is not None and base_user not in ROOT_USERS
        lines += ["USER root", install, f"USER {base_user}"] if restore else [install]
    return "\n".join(lines) + "\n"
