"""How a job's pods mount the datacenter's shared filesystem: the datacenter's storage fields, read once."""

from __future__ import annotations

from dataclasses import dataclass

from datacenters.models import Datacenter


@dataclass(frozen=True)
class Storage:
    """How pods mount the datacenter's shared filesystem (the same one the portal sees at storage_root)."""

    kind: str
    public_path: str = "public"
    host_path: str = ""
    nfs_server: str = ""
    nfs_path: str = ""
    cephfs_monitors: tuple[str, ...] = ()
    cephfs_user: str = ""
    cephfs_secret_name: str = ""
    cephfs_path: str = "/"
    pvc_name: str = ""

    @classmethod
    def of(cls, dc: Datacenter) -> Storage:
        return cls(
            kind=dc.storage_kind,
            public_path=dc.public_path.strip("/") or "public",
            host_path=dc.host_path,
            nfs_server=dc.nfs_server,
            nfs_path=dc.nfs_path,
            cephfs_monitors=tuple(m.strip() for m in dc.cephfs_monitors.split(",") if m.strip()),
            cephfs_user=dc.cephfs_user,
            cephfs_secret_name=dc.cephfs_secret_name,
            cephfs_path=dc.cephfs_path or "/",
            pvc_name=dc.pvc_name,
        )
