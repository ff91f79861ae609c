"""Build the test node's OCI images without Docker: the runtime image from deploy/Dockerfile, and pause.

`python3 tools/k8s/images.py build` (root; standard library only, so it runs before the venv exists; the Dockerfile
subset is carried out by dockerfile.py, the layouts written by oci_layout.py);
`... build-portal` builds the portal image from deploy/Dockerfile.portal the same way, and `... build-services`
the PostgreSQL + Redis stand-in of tools/k8s/Dockerfile.services (both only for the deploy tests); `... build-builder`
packs Kaniko's executor (tools/k8s/build-builder.sh) as the in-cluster image builder:

- The runtime image is *derived from deploy/Dockerfile*: `FROM debian:<suite>-slim` becomes an
  mmdebstrap minbase root filesystem, and ENV / RUN / COPY / USER / WORKDIR / CMD are carried out in
  it (RUN in a bubblewrap sandbox rooted there). Everything before the first COPY is the cached base
  layer; the rest runs on an overlay above it and its upper directory is the second layer. So a change
  to the client rebuilds one small layer in seconds, and the Dockerfile is the one description.
- The pause image is one layer holding the static `pause` binary build-node.sh made.

Layers, configs and manifests are written as OCI layouts under `<cache>/images/`, keyed by the hash
of what went in; `<cache>/images/images.json` names the current refs and layout directories, which
tools/k8s/testcluster/node.py imports into containerd (`ctr images import`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script (`python3 tools/k8s/images.py build`, before the venv exists): make `tools.k8s` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.k8s.bin_dirs import builder_bin_dir, node_bin_dir
from tools.k8s.dockerfile import Chroot, apply, digest_of, parse_dockerfile
from tools.k8s.oci_layout import cached_sha256, overlay_whiteouts_to_oci, tar_layer, write_layout
from tools.k8s.shell import run

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DOCKERFILE = REPO / "deploy" / "Dockerfile"
RUNTIME_REPO = "paddlecloud.local/paddle"
# The deploy tests' images: name -> (Dockerfile, repository). Not part of `build`: only those tests need them.
DEPLOY_IMAGES = {
    "portal": (REPO / "deploy" / "Dockerfile.portal", "paddlecloud.local/portal"),
    "services": (HERE / "Dockerfile.services", "paddlecloud.local/services"),
}
PAUSE_REF = "paddlecloud.local/pause:1"
BUILDER_REPO = "paddlecloud.local/kaniko-executor"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEBIAN_MIRROR = "http://deb.debian.org"


def cache_root() -> Path:
    return Path(os.environ.get("PADDLECLOUD_K8S_CACHE") or Path.home() / ".cache" / "paddlecloud" / "k8s")


def images_dir() -> Path:
    return cache_root() / "images"


def manifest_path() -> Path:
    return images_dir() / "images.json"


def read_manifest() -> dict[str, Any] | None:
    """{"runtime": {"ref", "layout"}, "pause": {...}, "builder": {...}}: this checkout's runtime, the last pause image
    built and, once packed, the image builder; None if the runtime or pause is missing (run `tools/k8s/build.sh`)."""
    path = manifest_path()
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    # The runtime built from *this* checkout (another checkout's build may have written the file):
    # an image with an older client ran the old launcher in the pods (found by the first real runs).
    key = runtime_key()
    data["runtime"] = {"ref": f"{RUNTIME_REPO}:3.0.0-{key}", "layout": str(images_dir() / f"runtime-{key}")}
    # The image builder of this checkout's KANIKO_VERSION, when built (other checkouts rewrite images.json).
    data.pop("builder", None)
    builder = builder_entry()
    if Path(builder["layout"], "index.json").exists():
        data["builder"] = builder
    if not all(Path(entry["layout"], "index.json").exists() for entry in data.values()):
        return None
    return data


def build_base(steps: list[tuple[str, str]], env: dict[str, str], config: dict[str, Any]) -> tuple[Path, Path]:
    """The root filesystem of FROM + every step before the first COPY, cached by their text."""
    key = digest_of(steps)[:16]
    base = images_dir() / f"base-{key}"
    rootfs, layer = base / "rootfs", base / "layer.tar"
    state = base / "state.json"
    if state.exists() and layer.exists():
        saved = json.loads(state.read_text())
        env.update(saved["env"])
        config.update(saved["config"])
        return rootfs, layer
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    suite = steps[0][1].split(":", 1)[1].removesuffix("-slim")
    run(
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        '--aptopt=Acquire::Check-Valid-Until "false"',
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        suite,
        str(rootfs),
        # The same mirrors as this machine's apt sources (deb.debian.org only).
        f"deb {DEBIAN_MIRROR}/debian {suite} main",
        f"deb {DEBIAN_MIRROR}/debian {suite}-updates main",
        f"deb {DEBIAN_MIRROR}/debian-security {suite}-security main",
    )
    chroot = Chroot(rootfs, env, images_dir() / "pip-cache")
    apply(steps[1:], chroot, config)
    tar_layer(rootfs, layer)
    state.write_text(json.dumps({"env": chroot.env, "config": config}))
    return rootfs, layer


def runtime_key() -> str:
    """The runtime image's key: the Dockerfile's steps and the files they copy from this checkout."""
    return digest_of(parse_dockerfile(DOCKERFILE.read_text()))[:12]


def build_runtime() -> dict[str, str]:
    return build_image(DOCKERFILE, f"{RUNTIME_REPO}:3.0.0-{runtime_key()}", f"runtime-{runtime_key()}")


def deploy_image(name: str) -> dict[str, str]:
    """A deploy test's image ("portal", "services") from *this* checkout: {"ref", "layout"}."""
    dockerfile, repository = DEPLOY_IMAGES[name]
    key = digest_of(parse_dockerfile(dockerfile.read_text()))[:12]
    return {"ref": f"{repository}:{key}", "layout": str(images_dir() / f"{name}-{key}")}


KEEP_DEPLOY_IMAGES = 3  # layouts kept per deploy image: each portal change makes a new ~300 MB top layer


def build_deploy_image(name: str) -> dict[str, str]:
    entry = deploy_image(name)
    built = build_image(DEPLOY_IMAGES[name][0], entry["ref"], Path(entry["layout"]).name)
    # Older checkouts' layouts pile up in a long-lived cache (CI's): keep the newest few, which other
    # worktrees on this machine may still be importing.
    current = Path(entry["layout"]).name
    for pattern in (f"{name}-*", f"top-{name}-*"):
        others = [p for p in images_dir().glob(pattern) if p.name.removeprefix("top-") != current]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in others[KEEP_DEPLOY_IMAGES - 1 :]:
            shutil.rmtree(stale, ignore_errors=True)
    return built


def build_image(dockerfile: Path, ref: str, name: str) -> dict[str, str]:
    """Build `dockerfile` (the subset above) into the OCI layout `<images>/<name>` that names `ref`."""
    steps = parse_dockerfile(dockerfile.read_text())
    layout = images_dir() / name
    if (layout / "index.json").exists():
        return {"ref": ref, "layout": str(layout)}
    first_copy = next((i for i, (op, _) in enumerate(steps) if op == "COPY"), len(steps))
    env: dict[str, str] = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    config: dict[str, Any] = {"Env": [f"{k}={v}" for k, v in env.items()]}
    (images_dir() / "pip-cache").mkdir(parents=True, exist_ok=True)
    rootfs, base_layer = build_base(steps[:first_copy], env, config)
    work = images_dir() / f"top-{name}"
    if work.exists():
        shutil.rmtree(work)
    upper, scratch, merged = work / "upper", work / "work", work / "merged"
    for d in (upper, scratch, merged):
        d.mkdir(parents=True)
    run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={rootfs},upperdir={upper},workdir={scratch}", str(merged))
    try:
        top = Chroot(merged, env, images_dir() / "pip-cache")
        top.workdir = config.get("WorkingDir", "/")  # a WORKDIR before the first COPY holds after it
        apply(steps[first_copy:], top, config)
    finally:
        run("umount", str(merged))
    overlay_whiteouts_to_oci(upper)
    top_layer = work / "layer.tar"
    layers = []
    for path in (base_layer, top_layer):
        digest, size = tar_layer(upper, path) if path is top_layer else (cached_sha256(path), path.stat().st_size)
        layers.append((path, digest, size))
    write_layout(layout, ref, layers, config)
    shutil.rmtree(upper)
    return {"ref": ref, "layout": str(layout)}


def build_pause(node_bin: Path) -> dict[str, str]:
    binary = node_bin / "pause"
    key = hashlib.sha256(binary.read_bytes()).hexdigest()[:12]
    layout = images_dir() / f"pause-{key}"
    if (layout / "index.json").exists():
        return {"ref": PAUSE_REF, "layout": str(layout)}
    work = images_dir() / f"pause-src-{key}"
    if work.exists():
        shutil.rmtree(work)
    (work / "root").mkdir(parents=True)
    shutil.copy2(binary, work / "root" / "pause")
    layer = work / "layer.tar"
    digest, size = tar_layer(work / "root", layer)
    write_layout(layout, PAUSE_REF, [(layer, digest, size)], {"Entrypoint": ["/pause"], "User": "65535:65535"})
    return {"ref": PAUSE_REF, "layout": str(layout)}


def builder_entry() -> dict[str, str]:
    """Where the builder image of this checkout's KANIKO_VERSION is (or would be): its ref and layout."""
    version = builder_bin_dir().parent.name.removeprefix("builder-kaniko")
    return {"ref": f"{BUILDER_REPO}:{version}", "layout": str(images_dir() / f"builder-kaniko{version}")}


def build_builder() -> dict[str, str] | None:
    """The in-cluster image builder: one layer with Kaniko's executor and a CA bundle, laid out as
    Kaniko's own image is (everything under /kaniko, which Kaniko never replaces while it unpacks a
    base image over the container's root). None when build-builder.sh has not built the executor."""
    executor = builder_bin_dir() / "executor"
    if not executor.exists():
        return None
    entry = builder_entry()
    layout = Path(entry["layout"])
    if (layout / "index.json").exists():
        return entry
    work = images_dir() / f"{layout.name}-src"
    if work.exists():
        shutil.rmtree(work)
    kaniko = work / "root" / "kaniko"
    (kaniko / "ssl" / "certs").mkdir(parents=True)
    (kaniko / ".docker").mkdir()
    (work / "root" / "workspace").mkdir()
    shutil.copy2(executor, kaniko / "executor")
    if HOST_CA_BUNDLE.exists():  # public registries' CAs; a private one's comes from the datacenter
        shutil.copy2(HOST_CA_BUNDLE, kaniko / "ssl" / "certs" / "ca-certificates.crt")
    layer = work / "layer.tar"
    digest, size = tar_layer(work / "root", layer)
    config = {
        "Entrypoint": ["/kaniko/executor"],
        "Env": [
            "PATH=/usr/local/bin:/kaniko",
            "HOME=/root",
            "USER=root",
            "SSL_CERT_DIR=/kaniko/ssl/certs",
            "DOCKER_CONFIG=/kaniko/.docker/",
        ],
        "WorkingDir": "/workspace",
    }
    write_layout(layout, entry["ref"], [(layer, digest, size)], config)
    return entry


def main(argv: list[str]) -> int:
    deploy = {f"build-{name}": name for name in DEPLOY_IMAGES}
    commands = ("build", "build-builder", *deploy)
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python3 tools/k8s/images.py {'|'.join(commands)}", file=sys.stderr)
        return 2
    images_dir().mkdir(parents=True, exist_ok=True)
    lock = (images_dir() / ".lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time: they share the base root filesystem
    if argv[0] in deploy:
        entry = build_deploy_image(deploy[argv[0]])
        print(f"image {deploy[argv[0]]}: {entry['ref']} ({entry['layout']})")
        return 0
    if argv[0] == "build-builder":
        builder = build_builder()
        if builder is None:
            print(f"no Kaniko executor in {builder_bin_dir()}: run tools/k8s/build-builder.sh", file=sys.stderr)
            return 1
        print(f"image builder: {builder['ref']} ({builder['layout']})")
        return 0
    # The builder is not in images.json: read_manifest() adds it wherever its layout is packed.
    result = {"runtime": build_runtime(), "pause": build_pause(node_bin_dir())}
    manifest_path().write_text(json.dumps(result, indent=2))
    for name, entry in result.items():
        print(f"image {name}: {entry['ref']} ({entry['layout']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
