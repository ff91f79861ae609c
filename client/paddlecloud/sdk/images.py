"""In-cluster image builds from the client: request one, read it, follow its log, wait for it, cancel it.

`paddlectl images`, `image-status`, `image-logs` and `image-cancel`, `paddlectl build --remote` and
`paddlectl submit -build` all call these (the SDK: `from paddlecloud.sdk import images`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from paddlecloud.contract.imageref import image_problem
from paddlecloud.contract.states import TERMINAL_BUILD_STATES
from paddlecloud.sdk.errors import PaddleCloudError, UsageProblem
from paddlecloud.sdk.files import Files, check_remote, is_remote
from paddlecloud.sdk.session import Session, cursor_answers

BUILDS_FOLDER = "builds"  # where a local package is uploaded for a build: ~/builds/<its name>/


def package_folder(session: Session, package: str | Path, datacenter: str | None = None) -> str:
    """The /pfs/ folder to build from: a /pfs/ path as is (checked), a local directory uploaded first
    to /pfs/<dc>/home/<user>/builds/<directory name>/ (resumable; unchanged files are not sent again)."""
    text = str(package)
    if is_remote(text):
        return check_remote(text, session).rstrip("/")
    local = Path(text).expanduser()
    if not local.is_dir():
        raise UsageProblem(f"PACKAGE: {text} is not a directory (give a local directory or a /pfs/ path)")
    dc = datacenter or session.portal_datacenter
    folder = f"/pfs/{dc}/home/{session.username}/{BUILDS_FOLDER}/{local.resolve().name}"
    Files(session).copy([str(local) + "/"], folder + "/", None, None, package=True)
    return folder


def build_path(uid: str) -> str:
    return f"/images/{quote(uid, safe='')}"


def request_build(
    session: Session,
    package: str,
    image: str,
    registry: str,
    base_image: str = "",
    datacenter: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Ask the portal to build `image` from the /pfs/ folder `package` and push it with registry secret `registry`."""
    for flag, value in (("-image", image), ("-base-image", base_image)):
        problem = image_problem(value) if value else None
        if problem:
            raise UsageProblem(f"{flag}: {value!r} is not an image reference: {problem}")
    body: dict[str, Any] = {"package": package, "image": image, "registry": registry}
    if base_image:
        body["base_image"] = base_image
    if datacenter:
        body["datacenter"] = datacenter
    answer: dict[str, Any] = session.post("/images", body, params={"dry_run": "1"} if dry_run else None)
    return answer


def get_build(session: Session, uid: str) -> dict[str, Any]:
    answer: dict[str, Any] = session.get(build_path(uid))
    return answer


def list_builds(session: Session, active: bool = False) -> Iterator[dict[str, Any]]:
    return session.paginate("/images", {"active": "1"} if active else None)


def cancel_build(session: Session, uid: str) -> dict[str, Any]:
    answer: dict[str, Any] = session.delete(build_path(uid))
    return answer


def build_log(session: Session, uid: str, follow: bool = False, poll: float = 1.0) -> Iterator[str]:
    """The builder's log text, piece by piece, by cursor; with `follow`, until the log is complete."""
    cursor = ""
    while True:
        for answer in cursor_answers(lambda at: session.get(f"{build_path(uid)}/log", {"cursor": at}), cursor):
            if answer.get("text"):
                yield str(answer["text"])
            cursor = answer.get("cursor", cursor)
            if answer.get("complete"):
                return
        if not follow:
            return
        time.sleep(poll)


def wait_build(session: Session, uid: str, timeout: float | None = None, poll: float = 2.0) -> dict[str, Any]:
    """Poll until the build ends; return it. PaddleCloudError after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        build = get_build(session, uid)
        if build.get("state") in TERMINAL_BUILD_STATES:
            return build
        if deadline is not None and time.monotonic() >= deadline:
            raise PaddleCloudError(f"image build {uid} is still {build.get('state')} after {timeout:g} s")
        time.sleep(poll)
