"""The image builders paddlectl build drives (buildah, podman, docker): which one works here, and their commands.

The first builder on PATH that answers `<builder> info` is used, in the order of BUILDERS: buildah
and podman need no daemon; docker's CLI is often installed where no daemon runs, and then `docker
info` fails and the next one is tried. Builders read their own settings from the environment
(CONTAINERS_STORAGE_CONF, BUILDAH_ISOLATION, DOCKER_HOST), so paddlectl passes none.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from paddlecloud.contract.dockerfile import user_problem
from paddlecloud.sdk.errors import PaddleCloudError, UsageProblem

BUILDERS = ("buildah", "podman", "docker")
PROBE_SECONDS = 30
INSPECT_SECONDS = 60
# Where each builder keeps an image config's USER, for `inspect --format`.
USER_FORMAT = {"buildah": "{{.OCIv1.Config.User}}", "podman": "{{.Config.User}}", "docker": "{{.Config.User}}"}


@dataclass(frozen=True)
class Builder:
    """One builder program and the command lines paddlectl runs with it."""

    name: str
    program: str

    def build(self, context: Path, image: str) -> list[str]:
        return [self.program, "build", "-f", str(context / "Dockerfile"), "-t", image, str(context)]

    def push(self, image: str) -> list[str]:
        return [self.program, "push", image]

    def pull(self, image: str) -> list[str]:
        return [self.program, "pull", image]

    def inspect_user(self, image: str) -> list[str]:
        kind = ["--type", "image"] if self.name == "buildah" else []
        verb = ["inspect"] if self.name == "buildah" else ["image", "inspect"]
        return [self.program, *verb, *kind, "--format", USER_FORMAT[self.name], image]


def _answers(program: str) -> bool:
    try:
        probe = subprocess.run([program, "info"], capture_output=True, timeout=PROBE_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def find_builder(wanted: str | None = None, path: str | None = None) -> Builder | None:
    """The first working builder (or the one wanted: an error when it does not work); None when none works."""
    for name in (wanted,) if wanted else BUILDERS:
        program = shutil.which(name, path=path)
        if program and _answers(program):
            return Builder(name, program)
        if wanted:
            where = "does not answer `info` (is its daemon or storage set up?)" if program else "is not on PATH"
            raise UsageProblem(f"--builder: {name} {where}")
    return None


def base_user(builder: Builder, image: str) -> str:
    """The base image's USER ('' for root), pulling the image first when the builder does not have it."""
    inspect = builder.inspect_user(image)
    found = subprocess.run(inspect, capture_output=True, text=True, timeout=INSPECT_SECONDS, check=False)
    if found.returncode != 0:
        run(builder.pull(image), f"{builder.name} pull {image}")
        found = subprocess.run(inspect, capture_output=True, text=True, timeout=INSPECT_SECONDS, check=False)
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        raise PaddleCloudError(f"cannot read the USER of {image} with {builder.name}: {last}")
    user = found.stdout.strip()
    problem = user_problem(user)
    if problem:
        raise PaddleCloudError(f"the USER of {image} ({user[:100]!r}) {problem}; pass --base-user")
    return user


def run(command: list[str], what: str) -> None:
    """Run a builder step with its output on the terminal; a failure is one line naming the step."""
    try:
        done = subprocess.run(command, check=False)
    except OSError as exc:
        raise PaddleCloudError(f"{what}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise PaddleCloudError(f"{what} failed (exit {done.returncode}); its output is above")


def manual_steps(context: Path, image: str, push: bool) -> list[str]:
    """The commands a user runs elsewhere: docker's (podman and buildah take the same arguments)."""
    docker = Builder("docker", "docker")
    steps = [docker.build(context, image)] + ([docker.push(image)] if push else [])
    return [shlex.join(step) for step in steps]
