"""buildah for the image build tests: a private storage root (all removed after), the node's runtime image as base.

Tests that build need buildah and root. Locally they skip naming what is missing; in CI (CI=true or
PADDLECLOUD_REQUIRE_K8S=1) they fail instead, as CI installs buildah (.ci/services.sh).
The package they build needs no network: its requirement is a tiny pure-Python wheel written here.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import background_build
from tools.k8s.images import read_manifest

PADDLECTL = Path(sys.executable).parent / "paddlectl"
BLOB_INFO_CACHE = Path("/var/lib/containers")  # root's buildah keeps blob metadata here whatever the storage
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1"
WHEEL = "pcdemo_tiny-0.1-py3-none-any.whl"
ENTRY = "import os, pcdemo_tiny\nprint(pcdemo_tiny.greet(), 'in', os.getcwd(), 'as uid', os.getuid())\n"


def buildah_missing() -> str | None:
    if shutil.which("buildah") is None:
        return "buildah is not installed (apt-get install buildah; CI installs it in .ci/services.sh)"
    if os.geteuid() != 0:
        return "the buildah tests run as root (CI runs them as root)"
    if read_manifest() is None:
        return "the runtime image is not built for this checkout: run `sudo bash tools/k8s/build.sh`"
    return None


needs_buildah = pytest.mark.skipif(
    buildah_missing() is not None and not REQUIRED, reason=f"{buildah_missing()} (CI fails instead of skipping)"
)


def require_buildah() -> None:
    """Fail with the reason (reached in CI only: elsewhere the test is skipped by `needs_buildah`); in CI, first wait
    for the background build that makes the runtime image (tests/background_build.py)."""
    background_build.wait("node")
    missing = buildah_missing()
    if missing:
        pytest.fail(missing, pytrace=False)


def _unmount_beneath(root: Path) -> None:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in reversed(mounts):
        if mount.startswith(f"{root}/"):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)


@contextmanager
def buildah_storage(root: Path) -> Iterator[dict[str, str]]:
    """The environment for buildah with its storage under root (overlay, vfs where overlay fails); removed after."""
    conf = root / "storage.conf"
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf), "BUILDAH_ISOLATION": "chroot"}
    had_cache = BLOB_INFO_CACHE.exists()
    for driver in ("overlay", "vfs"):
        conf.write_text(f'[storage]\ndriver = "{driver}"\nrunroot = "{root}/run"\ngraphroot = "{root}/graph"\n')
        if subprocess.run(["buildah", "info"], env=env, capture_output=True, check=False).returncode == 0:
            break
    try:
        yield env
    finally:
        subprocess.run(["buildah", "rm", "--all"], env=env, capture_output=True, check=False)
        subprocess.run(["buildah", "rmi", "--all", "--force"], env=env, capture_output=True, check=False)
        _unmount_beneath(root)
        shutil.rmtree(root, ignore_errors=True)
        if not had_cache:
            shutil.rmtree(BLOB_INFO_CACHE, ignore_errors=True)


def buildah(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["buildah", *args], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout.strip()


def load_base(env: dict[str, str], root: Path) -> str:
    """Put the node's runtime image (an OCI layout) in buildah's storage under its ref; return the ref."""
    manifest = read_manifest()
    assert manifest is not None
    # buildah names an image pulled from a layout after its path, which must read as a reference.
    link = root / "base"
    link.symlink_to(manifest["runtime"]["layout"])
    image_id = buildah(env, "pull", "--quiet", f"oci:{link}").splitlines()[-1]
    ref: str = manifest["runtime"]["ref"]
    buildah(env, "tag", image_id, ref)
    return ref


def tiny_wheel(folder: Path) -> Path:
    """A pure-Python wheel (pcdemo-tiny 0.1) written by hand: pip installs it with no network."""
    files = {
        "pcdemo_tiny/__init__.py": b"def greet() -> str:\n    return 'tiny wheel 0.1'\n",
        "pcdemo_tiny-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pcdemo-tiny\nVersion: 0.1\n",
        "pcdemo_tiny-0.1.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    record.append("pcdemo_tiny-0.1.dist-info/RECORD,,")
    files["pcdemo_tiny-0.1.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / WHEEL
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


def trainer_package(root: Path) -> Path:
    """A trainer package whose requirements.txt names the tiny wheel by a path relative to the package."""
    root.mkdir(parents=True)
    (root / "entry.py").write_text(ENTRY)
    tiny_wheel(root / "wheels")
    (root / "requirements.txt").write_text(f"./wheels/{WHEEL}\n")
    return root


def paddlectl_build(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed paddlectl as a real process (the builder's output is kept for the assertion message)."""
    return subprocess.run(
        [str(PADDLECTL), "build", *args], env=env, capture_output=True, text=True, check=False, timeout=900
    )
