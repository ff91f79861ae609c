"""The Django admin is the operators' console: Carol manages, Alice cannot, secrets stay masked."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from datacenters.models import Datacenter
from registry.models import RegistrySecret

ADMIN_PAGES = [
    "/admin/",
    "/admin/datacenters/datacenter/",
    "/admin/datacenters/quota/",
    "/admin/registry/registrysecret/",
    "/admin/accounts/apitoken/",
    "/admin/health/workerheartbeat/",
    "/admin/auth/user/",
]


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_carol_the_operator_opens_every_admin_list(carol: User, local_dc: Datacenter, path: str) -> None:
    client = Client()
    client.force_login(carol)
    assert client.get(path).status_code == 200


def test_alice_is_sent_to_the_admin_login(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    response = client.get("/admin/datacenters/datacenter/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_registry_password_is_write_only_in_the_admin(carol: User, alice: User) -> None:
    secret = RegistrySecret.objects.create(
        owner=alice, name="harbor", server="h.example", username="u", password="Top-Secret-1"
    )
    client = Client()
    client.force_login(carol)
    for path in ("/admin/registry/registrysecret/", f"/admin/registry/registrysecret/{secret.pk}/change/"):
        page = client.get(path).content.decode()
        assert "Top-Secret-1" not in page
    # Saving with the password left blank keeps the stored one.
    response = client.post(
        f"/admin/registry/registrysecret/{secret.pk}/change/",
        {"owner": alice.pk, "name": "harbor", "server": "h2.example", "username": "u", "password": ""},
    )
    assert response.status_code == 302
    secret.refresh_from_db()
    assert (secret.server, secret.password) == ("h2.example", "Top-Secret-1")


def test_admin_add_registry_secret_requires_a_password(carol: User, alice: User) -> None:
    client = Client()
    client.force_login(carol)
    response = client.post(
        "/admin/registry/registrysecret/add/",
        {"owner": alice.pk, "name": "harbor", "server": "h.example", "username": "u", "password": ""},
    )
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert not RegistrySecret.objects.exists()


def test_carol_adds_a_kubernetes_datacenter_and_the_kubeconfig_is_never_shown(carol: User) -> None:
    client = Client()
    client.force_login(carol)
    form = {
        "name": "gpu-east",
        "description": "",
        "engine": "kubernetes",
        "enabled": "on",
        "all_users": "on",
        "kubeconfig": "apiVersion: v1\nkind: Config # token: kube-secret-42",
        "kube_context": "",
        "namespace_prefix": "paddle-",
        "storage_kind": "nfs",
        "storage_root": "/mnt/pfs/gpu-east",
        "public_path": "public",
        "host_path": "",
        "nfs_server": "nfs.example",
        "nfs_path": "/export/pfs",
        "cephfs_monitors": "",
        "cephfs_user": "admin",
        "cephfs_secret_name": "",
        "cephfs_path": "/",
        "pvc_name": "",
        "cpu_image": "paddlepaddle/paddle:3.0.0",
        "gpu_image": "paddlepaddle/paddle:3.0.0-gpu",
        "pending_timeout": "600",
        "stall_timeout": "1800",
        "admission": "portal",
        "job_egress": "on",
        "wait_for_isolation": "on",
        "kubelet_port": "10250",
        "job_pids_limit": "4096",
        "user_pids_limit": "8192",
        "job_log_limit": "256Mi",
        "finished_ttl": "86400",
        "default_cpu": "8",
        "default_memory": "32Gi",
        "default_gpu": "1",
        "default_jobs": "5",
        "default_storage": "1Ti",
        "default_storage_files": "100000",
        "quotas-TOTAL_FORMS": "0",
        "quotas-INITIAL_FORMS": "0",
        "quotas-MIN_NUM_FORMS": "0",
        "quotas-MAX_NUM_FORMS": "1000",
        "capacity_cpu": "",
        "capacity_memory": "",
        "capacity_gpu": "",
        "max_queued_jobs": "100",
        "fair_share_half_life": "604800",
        "reserve_after": "600",
        "preemption_delay": "60",
        "preemption_grace": "30",
        "elastic_grow_after": "60",
        "team_quotas-TOTAL_FORMS": "0",
        "team_quotas-INITIAL_FORMS": "0",
        "team_quotas-MIN_NUM_FORMS": "0",
        "team_quotas-MAX_NUM_FORMS": "1000",
    }
    response = client.post("/admin/datacenters/datacenter/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    dc = Datacenter.objects.get(name="gpu-east")
    assert "kube-secret-42" in dc.kubeconfig
    page = client.get(f"/admin/datacenters/datacenter/{dc.pk}/change/").content.decode()
    assert "kube-secret-42" not in page

    bad = {**form, "name": "gpu_west", "nfs_server": "", "default_memory": "32GB"}
    page = client.post("/admin/datacenters/datacenter/add/", bad).content.decode()
    assert "found &#x27;_&#x27;" in page
    assert "required for NFS storage" in page
    assert "memory &#x27;32GB&#x27; is not a quantity" in page
    assert not Datacenter.objects.filter(name="gpu_west").exists()
