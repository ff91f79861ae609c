"""The kubernetes engine's rules: cluster credentials, and a storage kind every pod can mount."""

from __future__ import annotations

from typing import Any

from cryptography import x509
from paddlecloud.contract.imageref import image_problem

from core.errors import Invalid
from datacenters.models import Admission, Datacenter, StorageKind
from jobs.engines.kubernetes.names import jobset_name_problem
from jobs.engines.rules import EngineRules

_REQUIRED_BY_KIND: dict[StorageKind, list[str]] = {
    StorageKind.HOSTPATH: ["host_path"],
    StorageKind.NFS: ["nfs_server", "nfs_path"],
    StorageKind.CEPHFS: ["cephfs_monitors", "cephfs_secret_name"],
    StorageKind.PVC: ["pvc_name"],
    StorageKind.LOCAL: [],
}


def ca_problem(pem: str) -> str | None:
    """Why `pem` (a datacenter's builder_ca) is not one or more PEM certificates, or None."""
    try:
        certificates = x509.load_pem_x509_certificates(pem.encode())
    except ValueError as exc:
        return f"must be PEM certificates (-----BEGIN CERTIFICATE-----...): {exc}"
    return None if certificates else "must hold at least one PEM certificate"


class KubernetesRules(EngineRules):
    admissions = ("portal", "kueue")

    @classmethod
    def validate_datacenter(cls, datacenter: Datacenter) -> dict[str, str]:
        errors: dict[str, str] = {}
        if not datacenter.in_cluster and not datacenter.kubeconfig:
            errors["kubeconfig"] = "required for the kubernetes engine unless 'in cluster' is set"
        for field in _REQUIRED_BY_KIND[StorageKind(datacenter.storage_kind)]:
            if not getattr(datacenter, field):
                errors[field] = f"required for {datacenter.get_storage_kind_display()} storage"
        if datacenter.storage_kind == StorageKind.LOCAL:
            errors["storage_kind"] = "pods cannot mount a local directory; choose hostPath, NFS, CephFS or PVC"
        if datacenter.builder_image and (problem := image_problem(datacenter.builder_image)):
            errors["builder_image"] = problem
        if datacenter.builder_ca and (problem := ca_problem(datacenter.builder_ca)):
            errors["builder_ca"] = problem
        return errors

    @classmethod
    def check_spec(cls, datacenter: Datacenter, spec: dict[str, Any]) -> None:
        # A bad reference would otherwise wait in `pending` as InvalidImageName until its timeout.
        if spec.get("image") and (problem := image_problem(spec["image"])):
            raise Invalid(f"{spec['image'][:100]!r} is not an image reference: {problem}", "image")
        if datacenter.admission == Admission.KUEUE:
            trainers, pservers = int(spec.get("parallelism", 1)), int(spec.get("pservers", 0))
            if problem := jobset_name_problem(spec["jobname"], trainers, pservers):
                raise Invalid(problem, "jobname")

    @classmethod
    def check_builds(cls, datacenter: Datacenter) -> None:
        if not datacenter.builder_image:
            raise Invalid(f"{datacenter.name} has no image builder configured (ask its operators)", "datacenter")
