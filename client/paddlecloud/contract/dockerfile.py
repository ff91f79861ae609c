"""The runtime image's Dockerfile: a base image, the user's package copied in, its requirements installed.

The one rule for that text: `paddlectl build` (on the user's machine) and the in-cluster builder
(kaniko, images/) both write it with `runtime_dockerfile`.
"""

from __future__ import annotations

DEFAULT_DEST = "/workspace/package"
REQUIREMENTS = "requirements.txt"
RUN_AS = "1000:1000"  # the uid:gid jobs run as (pods' runAsUser), so the package's files are the job's


def runtime_dockerfile(base_image: str, dest: str = DEFAULT_DEST, requirements: bool = False) -> str:
    """The Dockerfile; `requirements`: the package has a requirements.txt at its top, to pip-install.

    No RUN step when there are no requirements: the image is then the base plus one layer, and the
    base needs no shell (and the build no network) at all.
    """
    lines = [f"FROM {base_image}", f"COPY --chown={RUN_AS} . {dest}"]
    if requirements:
        # Into the base's own Python environment, which root owns (the base image ends as uid 1000).
        lines += ["USER root", f"RUN python -m pip install --no-cache-dir -r {dest}/{REQUIREMENTS}"]
    lines += [f"USER {RUN_AS}", f"WORKDIR {dest}"]
    return "\n".join(lines) + "\n"
