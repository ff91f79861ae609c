"""OCI image layouts on disk, as `ctr images import` reads them: layer tars (overlayfs deletions turned into
OCI whiteouts), their digests, and the config, manifest and index that name an image."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from tools.k8s.shell import run


def overlay_whiteouts_to_oci(upper: Path) -> None:
    """overlayfs marks deletions with 0:0 character devices and opaque dirs with an xattr; OCI uses .wh. files."""
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                path.unlink()
                (Path(dirpath) / f".wh.{name}").touch()
            elif stat.S_ISDIR(st.st_mode):
                try:
                    opaque = os.getxattr(path, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
                except OSError:
                    opaque = False
                if opaque:
                    (path / ".wh..wh..opq").touch()


def tar_layer(src: Path, dest: Path) -> tuple[str, int]:
    """Tar a directory as an uncompressed layer; returns (sha256 hex, size)."""
    run("tar", "--numeric-owner", "--xattrs", "--sort=name", "-C", str(src), "-cf", str(dest), ".")
    return file_sha256(dest), dest.stat().st_size


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of a file, read a MiB at a time (layers are up to a few GB)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_layout(layout: Path, ref: str, layers: list[tuple[Path, str, int]], config: dict[str, Any]) -> None:
    """An OCI image layout (hard links to the layer tars) whose index names `ref` for ctr images import."""
    if layout.exists():
        shutil.rmtree(layout)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    for path, digest, _ in layers:
        os.link(path, blobs / digest)

    def blob(data: dict[str, Any]) -> dict[str, Any]:
        raw = json.dumps(data, sort_keys=True).encode()
        digest = hashlib.sha256(raw).hexdigest()
        (blobs / digest).write_bytes(raw)
        return {"digest": f"sha256:{digest}", "size": len(raw)}

    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for _, d, _ in layers]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(image_config)},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": f"sha256:{d}", "size": s}
            for _, d, s in layers
        ],
    }
    descriptor = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **blob(manifest),
        "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref},
    }
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def cached_sha256(path: Path) -> str:
    """file_sha256, remembered beside the file (`<name>.sha256`) while the file is not newer: the cached base
    layer is hashed once, not at every build."""
    cached = path.with_suffix(".sha256")
    if cached.exists() and cached.stat().st_mtime >= path.stat().st_mtime:
        return cached.read_text().strip()
    digest = file_sha256(path)
    cached.write_text(digest)
    return digest
