"""deploy/: every overlay renders with kustomize, the test API server accepts every object, and the rules hold.

The rules: exactly one beat; no secret written in a manifest; probes on /healthz and /readyz; every
container non-root, without capabilities, read-only, bounded; every portal pod migrates first.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from core import lanes
from tools.k8s.dockerfile import SUPPORTED, parse_dockerfile
from tools.k8s.testcluster import TestCluster, default_bin_dir

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
WORKLOADS = ("Deployment", "StatefulSet")
PORTAL = "paddlecloud-portal"  # the app.kubernetes.io/name of the portal's own pods
SECRET_SETTINGS = {
    "SECRET_KEY", "PADDLECLOUD_ENCRYPTION_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "PADDLECLOUD_CACHE_URL",
    "EMAIL_HOST_PASSWORD", "POSTGRES_PASSWORD", "REDIS_PASSWORD",
}  # fmt: skip
MIGRATE = ["python", "manage.py", "migrate_locked"]

Doc = dict[str, Any]


def kubectl() -> str:
    """kubectl (its built-in kustomize renders deploy/): PADDLECLOUD_KUBECTL, else the one tools/k8s/build.sh
    built beside the control plane (same version as the server), else the one on PATH."""
    built = default_bin_dir() / "kubectl"
    found = os.environ.get("PADDLECLOUD_KUBECTL") or (str(built) if built.exists() else shutil.which("kubectl"))
    if found:
        return found
    message = "kubectl not found (run tools/k8s/build.sh, set PADDLECLOUD_KUBECTL or put kubectl on PATH)"
    if os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


_rendered: dict[str, list[Doc]] = {}


def kustomize(folder: Path) -> list[Doc]:
    out = subprocess.run([kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def render(overlay: str) -> list[Doc]:
    """The overlay's objects (rendered once per session; each caller gets its own copy to change)."""
    if overlay not in _rendered:
        _rendered[overlay] = kustomize(DEPLOY / "overlays" / overlay)
    return copy.deepcopy(_rendered[overlay])


@pytest.fixture(params=OVERLAYS)
def docs(request: pytest.FixtureRequest) -> list[Doc]:
    return render(request.param)


def of_kind(docs: list[Doc], *kinds: str) -> list[Doc]:
    return [d for d in docs if d["kind"] in kinds]


def pod_specs(docs: list[Doc]) -> Iterator[tuple[Doc, Doc]]:
    for workload in of_kind(docs, *WORKLOADS):
        yield workload, workload["spec"]["template"]["spec"]


def containers(pod: Doc) -> list[Doc]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def portal_deployments(docs: list[Doc]) -> dict[str, Doc]:
    found = {}
    for d in of_kind(docs, "Deployment"):
        labels = d["spec"]["template"]["metadata"]["labels"]
        if labels.get("app.kubernetes.io/name") == PORTAL:
            found[labels["app.kubernetes.io/component"]] = d
    return found


def test_there_is_an_external_default_and_a_with_services_overlay() -> None:
    assert OVERLAYS == ["external", "with-services"]
    assert not of_kind(render("external"), "StatefulSet")
    assert sorted(d["metadata"]["name"] for d in of_kind(render("with-services"), "StatefulSet")) == [
        "paddlecloud-postgres",
        "paddlecloud-redis",
    ]


# ----- accepted by a real API server -----


def retargeted(docs: list[Doc], namespace: str) -> list[Doc]:
    """The same objects in a fresh namespace (the rendered `paddlecloud` one is not created by a dry run)."""
    out = []
    for doc in docs:
        if doc["kind"] != "Namespace" and doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            doc = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
        if doc["kind"] == "ClusterRoleBinding":
            doc = {**doc, "subjects": [{**s, "namespace": namespace} for s in doc["subjects"]]}
        out.append(doc)
    return out


def dry_run_apply(cluster: TestCluster, docs: list[Doc], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    # Server-side apply with strict field validation: the server checks every field of every object
    # (an unknown or misspelt field is an error, not a warning) and stores nothing.
    return subprocess.run(
        [kubectl(), "--kubeconfig", str(cluster.kubeconfig_path), "apply", "--server-side", "--dry-run=server",
         "--force-conflicts", "--field-manager=paddlecloud-deploy-test", "--validate=strict", "-f", str(manifest)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_every_rendered_object_is_accepted_by_a_server_side_dry_run(
    docs: list[Doc], k8s_cluster: TestCluster, k8s_namespace: str, tmp_path: Path
) -> None:
    result = dry_run_apply(k8s_cluster, retargeted(docs, k8s_namespace), tmp_path)
    assert result.returncode == 0, result.stderr
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(docs), result.stdout


def test_the_dry_run_refuses_a_misspelt_field(k8s_cluster: TestCluster, k8s_namespace: str, tmp_path: Path) -> None:
    """So the test above proves something: the server validates strictly."""
    web = portal_deployments(render("external"))["web"]
    container = web["spec"]["template"]["spec"]["containers"][0]
    broken = {**web, "spec": {**web["spec"], "template": {**web["spec"]["template"], "spec": {
        **web["spec"]["template"]["spec"], "containers": [{**container, "livenesProbe": {}}]}}}}  # fmt: skip
    result = dry_run_apply(k8s_cluster, retargeted([broken], k8s_namespace), tmp_path)
    assert result.returncode != 0
    assert "livenesProbe" in result.stderr


# ----- the rules -----


def test_exactly_one_beat_which_is_never_rolled_beside_another(docs: list[Doc]) -> None:
    beats = [(w, c) for w, pod in pod_specs(docs) for c in pod["containers"] if "beat" in c.get("command", [])]
    assert len(beats) == 1
    workload, _ = beats[0]
    assert workload["kind"] == "Deployment"
    assert workload["spec"]["replicas"] == 1
    assert workload["spec"]["strategy"] == {"type": "Recreate"}


def test_no_secret_is_written_in_any_manifest(docs: list[Doc]) -> None:
    assert not of_kind(docs, "Secret")
    for _, pod in pod_specs(docs):
        for container in containers(pod):
            for var in container.get("env", []):
                if var["name"] in SECRET_SETTINGS:
                    assert "value" not in var, var["name"]
                    assert var["valueFrom"]["secretKeyRef"]["name"] == "paddlecloud", var["name"]
    for config in of_kind(docs, "ConfigMap"):
        assert not SECRET_SETTINGS & set(config["data"])
        for value in config["data"].values():
            assert not re.search(r"://[^/\s]*:[^/\s]*@", value), "a URL with credentials"
    rendered = yaml.safe_dump_all(docs).lower()
    assert "change-me" not in rendered and "password:" not in rendered


def test_every_portal_pod_gets_the_same_secrets_in_its_migrate_step_and_its_process(docs: list[Doc]) -> None:
    deployments = portal_deployments(docs)
    assert sorted(deployments) == ["beat", "web", "worker"]
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        migrate, main = pod["initContainers"][0], pod["containers"][0]
        assert migrate["command"] == MIGRATE, name
        assert migrate["image"] == main["image"], name
        assert migrate["env"] == main["env"], name
        required = {v["name"] for v in main["env"] if not v["valueFrom"]["secretKeyRef"].get("optional")}
        assert required == {"SECRET_KEY", "PADDLECLOUD_ENCRYPTION_KEY", "DATABASE_URL", "CELERY_BROKER_URL"}


def test_every_lane_has_a_worker_container_of_its_own_with_the_workers_secrets(docs: list[Doc]) -> None:
    """Control, per-job, side and notification work each get slots no other lane's backlog can take."""
    pod = portal_deployments(docs)["worker"]["spec"]["template"]["spec"]
    consumed = {}
    for container in pod["containers"]:
        command = container["command"]
        consumed[container["name"]] = command[command.index("-Q") + 1].split(",")
        assert container["env"] == pod["containers"][0]["env"], container["name"]
    assert sorted(queue for queues in consumed.values() for queue in queues) == sorted(
        "celery" if lane == lanes.JOBS else f"celery-{lane}" for lane in lanes.LANES
    )
    assert all(len(queues) == 1 for queues in consumed.values()), consumed


def test_web_is_probed_on_healthz_and_readyz(docs: list[Doc]) -> None:
    web = portal_deployments(docs)["web"]["spec"]["template"]["spec"]["containers"][0]
    assert [p["name"] for p in web["ports"]] == ["http"]
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    # /readyz bounds each dependency check at a few seconds; the kubelet must wait longer than both.
    assert web["readinessProbe"]["timeoutSeconds"] >= 5


def test_every_container_runs_non_root_read_only_without_capabilities_and_bounded(docs: list[Doc]) -> None:
    for workload, pod in pod_specs(docs):
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in containers(pod):
            where = f"{name}/{container['name']}"
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, where
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) == {"cpu", "memory"}, where


def test_portal_pods_run_as_the_job_pods_uid_and_the_engine_account(docs: list[Doc]) -> None:
    deployments = portal_deployments(docs)
    accounts = {a["metadata"]["name"]: a for a in of_kind(docs, "ServiceAccount")}
    bindings = {b["roleRef"]["name"]: b for b in of_kind(docs, "ClusterRoleBinding")}
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    assert set(accounts) == {"paddlecloud", "paddlecloud-web"}
    for role, account in (("paddlecloud-engine", "paddlecloud"), ("paddlecloud-web", "paddlecloud-web")):
        assert bindings[role]["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                               "namespace": accounts[account]["metadata"]["namespace"]}]  # fmt: skip
    for component, account in (("web", "paddlecloud-web"), ("worker", "paddlecloud")):
        pod = deployments[component]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account
        assert pod["securityContext"]["runAsUser"] == 1000  # PADDLECLOUD_POD_UID's default: both write the PFS
        assert {"name": "pfs", "mountPath": "/pfs"} in pod["containers"][0]["volumeMounts"]
    # The internet-facing pods may read pod logs and Kueue's queue positions, and nothing else of the cluster.
    web_rights = {(res, verb) for rule in roles["paddlecloud-web"]["rules"] for res in rule["resources"]
                  for verb in rule["verbs"]}  # fmt: skip
    assert web_rights == {("pods", "list"), ("pods/log", "get"), ("clusterqueues/pendingworkloads", "get")}
    assert deployments["beat"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_settings_are_ones_the_portal_reads_and_every_pod_uses_them(docs: list[Doc]) -> None:
    (config,) = of_kind(docs, "ConfigMap")
    settings_source = (ROOT / "portal" / "settings.py").read_text()
    for key in config["data"]:
        assert f'"{key}"' in settings_source, f"{key} is not read by portal/settings.py"
    assert config["data"]["DEBUG"] == "false"
    assert config["data"]["PADDLECLOUD_TRUSTED_PROXIES"] == "1"
    for deployment in portal_deployments(docs).values():
        for container in containers(deployment["spec"]["template"]["spec"]):
            assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]


def test_disruption_budgets_service_and_ingress_point_at_real_pods(docs: list[Doc]) -> None:
    templates = [w["spec"]["template"]["metadata"]["labels"] for w in of_kind(docs, *WORKLOADS)]

    def selects(selector: dict[str, str]) -> bool:
        return any(selector.items() <= labels.items() for labels in templates)

    budgets = of_kind(docs, "PodDisruptionBudget")
    assert sorted(b["metadata"]["name"] for b in budgets) == ["paddlecloud-web", "paddlecloud-worker"]
    for budget in budgets:
        assert selects(budget["spec"]["selector"]["matchLabels"])
    services = {s["metadata"]["name"]: s for s in of_kind(docs, "Service")}
    for service in services.values():
        assert selects(service["spec"]["selector"])
    (ingress,) = of_kind(docs, "Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["port"]["name"] in [p["name"] for p in services[backend["name"]]["spec"]["ports"]]


# The deploy guide's example of an operator's own overlay (docs/how-to/operators/kubernetes.md, step 2),
# verbatim but the path.
SITE = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {overlay}
images:
  - name: registry.example.com/paddlecloud/portal
    newName: registry.example.org/paddle/portal
    newTag: "2026.11"
configMapGenerator:
  - name: paddlecloud-settings
    behavior: merge
    literals:
      - ALLOWED_HOSTS=paddle.example.org
      - CSRF_TRUSTED_ORIGINS=https://paddle.example.org
      - PADDLECLOUD_PUBLIC_URL=https://paddle.example.org
patches:
  - target: {{kind: Ingress, name: paddlecloud}}
    patch: |-
      - {{op: replace, path: /spec/rules/0/host, value: paddle.example.org}}
      - {{op: replace, path: /spec/tls/0/hosts/0, value: paddle.example.org}}
  # The PFS straight from the NFS export the datacenter names (storage kind NFS), instead of a claim.
  - target: {{kind: Deployment, name: "paddlecloud-(web|worker)"}}
    patch: |-
      - op: replace
        path: /spec/template/spec/volumes/0
        value: {{name: pfs, nfs: {{server: nfs.example.org, path: /export/pfs}}}}
  - patch: |-
      $patch: delete
      apiVersion: v1
      kind: PersistentVolumeClaim
      metadata: {{name: paddlecloud-pfs}}
"""


def test_an_operators_overlay_sets_image_host_and_pfs_and_is_accepted(
    k8s_cluster: TestCluster, k8s_namespace: str, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    # kustomize takes other kustomizations by relative path only.
    overlay = os.path.relpath(DEPLOY / "overlays" / "external", site)
    (site / "kustomization.yaml").write_text(SITE.format(overlay=overlay))
    docs = kustomize(site)
    assert not of_kind(docs, "PersistentVolumeClaim")
    for component, deployment in portal_deployments(docs).items():
        pod = deployment["spec"]["template"]["spec"]
        assert {c["image"] for c in containers(pod)} == {"registry.example.org/paddle/portal:2026.11"}
        if component != "beat":
            assert pod["volumes"][0] == {"name": "pfs", "nfs": {"server": "nfs.example.org", "path": "/export/pfs"}}
    (config,) = of_kind(docs, "ConfigMap")
    assert config["data"]["ALLOWED_HOSTS"] == "paddle.example.org"
    assert config["data"]["PADDLECLOUD_TRUSTED_PROXIES"] == "1"  # merged, not replaced
    (ingress,) = of_kind(docs, "Ingress")
    assert ingress["spec"]["rules"][0]["host"] == ingress["spec"]["tls"][0]["hosts"][0] == "paddle.example.org"
    result = dry_run_apply(k8s_cluster, retargeted(docs, k8s_namespace), tmp_path)
    assert result.returncode == 0, result.stderr


def test_the_portal_image_is_non_root_and_buildable_without_docker() -> None:
    steps = parse_dockerfile((DEPLOY / "Dockerfile.portal").read_text())
    assert {op for op, _ in steps} <= SUPPORTED  # tools/k8s/images.py can build it
    assert re.fullmatch(r"debian:[a-z]+-slim", steps[0][1])
    users = [arg for op, arg in steps if op == "USER"]
    assert users and users[-1] not in ("0", "root")
    copied = [arg.split()[0] for op, arg in steps if op == "COPY"]
    assert "." not in copied and "./" not in copied  # never the whole checkout (var/ holds generated keys)


def test_the_portal_image_copies_every_app_the_settings_install() -> None:
    """A local app missing from the image's COPY lines fails every portal pod at start (found in review)."""
    steps = parse_dockerfile((DEPLOY / "Dockerfile.portal").read_text())
    copied = {arg.split()[0].strip("/") for op, arg in steps if op == "COPY"}
    local = {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()}
    assert local <= copied, f"deploy/Dockerfile.portal does not COPY {sorted(local - copied)}"


def test_the_services_stand_in_keeps_the_uid_and_variables_the_with_services_overlay_relies_on() -> None:
    """Dockerfile.services stands in for the official images in test_deploy_job: it must keep their contract."""
    steps = parse_dockerfile((ROOT / "tools" / "k8s" / "Dockerfile.services").read_text())
    assert {op for op, _ in steps} <= SUPPORTED
    assert [arg for op, arg in steps if op == "USER"] == ["999"]
    entrypoint = (ROOT / "tools" / "k8s" / "postgres-entrypoint.sh").read_text()
    for statefulset in of_kind(render("with-services"), "StatefulSet"):
        pod = statefulset["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == 999
        for container in pod["containers"]:
            for name in (e["name"] for e in container.get("env", []) if e["name"].startswith(("POSTGRES_", "PG"))):
                assert "${" + name in entrypoint, f"the stand-in's entrypoint ignores {name}"
