"""The test registry itself (no node needed): TLS from its own CA, htpasswd logins, pushes, trust, clean stop."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools.k8s.images import read_manifest
from tools.k8s.testcluster.registry import TestRegistry


def get(registry: TestRegistry, path: str, login: tuple[str, str] | None = None) -> tuple[int, str]:
    """GET https://127.0.0.1:<port><path> trusting only the registry's CA; (status, body)."""
    context = ssl.create_default_context(cafile=str(registry.ca_file))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    request = urllib.request.Request(f"https://{registry.loopback_host}{path}")
    request.add_header("Accept", "application/vnd.oci.image.manifest.v1+json")
    if login:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(login).encode()).decode())
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_it_answers_only_to_its_users_over_tls(k8s_registry: TestRegistry) -> None:
    alice = ("alice", k8s_registry.users["alice"])
    assert get(k8s_registry, "/v2/", alice)[0] == 200
    status, body = get(k8s_registry, "/v2/", ("alice", "wrong"))
    assert status == 401
    assert "UNAUTHORIZED" in body
    assert get(k8s_registry, "/v2/")[0] == 401
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"https://{k8s_registry.loopback_host}/v2/")


def test_a_user_added_later_can_log_in_at_once(k8s_registry: TestRegistry) -> None:
    k8s_registry.add_user("carol", "carol-password-1")
    assert get(k8s_registry, "/v2/", ("carol", "carol-password-1"))[0] == 200
    k8s_registry.add_user("carol", "carol-password-2")  # a changed password replaces the old one
    assert get(k8s_registry, "/v2/", ("carol", "carol-password-1"))[0] == 401
    assert get(k8s_registry, "/v2/", ("carol", "carol-password-2"))[0] == 200


def test_the_node_trusts_it_through_containerd_hosts_config(k8s_registry: TestRegistry) -> None:
    if k8s_registry.hosts_dir is None:
        pytest.skip("only root tells the node's containerd to trust the registry")
    hosts = (k8s_registry.hosts_dir / k8s_registry.host / "hosts.toml").read_text()
    assert f'server = "https://{k8s_registry.host}"' in hosts
    ca = k8s_registry.hosts_dir / k8s_registry.host / "ca.crt"
    assert f'ca = "{ca}"' in hosts
    assert ca.read_text() == k8s_registry.ca_pem
    assert k8s_registry.host.startswith("10.244.0.1:")


def test_a_pushed_layout_is_served_to_its_users(k8s_registry: TestRegistry) -> None:
    manifest = read_manifest()
    if manifest is None:
        pytest.skip("node images are not built (tools/k8s/build.sh as root)")
    layout = Path(manifest["pause"]["layout"])  # small: the runtime image is pushed by the pull tests
    ref = k8s_registry.push_layout(layout, "bob/pause:1")
    assert ref == f"{k8s_registry.host}/bob/pause:1"
    status, body = get(k8s_registry, "/v2/bob/pause/manifests/1", ("bob", k8s_registry.users["bob"]))
    assert status == 200
    index = json.loads((layout / "index.json").read_text())
    pushed = json.loads(body)
    assert (
        pushed["config"]["digest"]
        == json.loads((layout / "blobs" / "sha256" / index["manifests"][0]["digest"].split(":")[1]).read_text())[
            "config"
        ]["digest"]
    )
    assert get(k8s_registry, "/v2/bob/pause/manifests/1", ("bob", "wrong"))[0] == 401


def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    registry = TestRegistry(work_dir=tmp_path / "reg", hosts_dir=tmp_path / "certs.d")
    registry.start()
    pids = [p.pid for p in registry._processes.values()]
    assert (tmp_path / "certs.d" / registry.host / "hosts.toml").exists()
    registry.stop()
    assert not (tmp_path / "certs.d" / registry.host).exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    owned = TestRegistry(hosts_dir=None)  # a registry that made its own work dir removes it
    owned.start()
    owned.stop()
    assert not owned.dir.exists()
