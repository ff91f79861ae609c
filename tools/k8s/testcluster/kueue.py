"""Kueue and JobSet on the test control plane: upstream's CRDs and webhooks pointed at 127.0.0.1, both controllers
as processes serving certs of the test PKI, and Kueue's visibility API behind the API server's aggregation layer."""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tools.k8s.bin_dirs import script_bin_dir
from tools.k8s.pki import FrontProxyPki, issue_serving_cert, make_front_proxy_pki
from tools.k8s.testcluster.processes import free_ports

KUEUE_BINARIES = ("kueue", "jobset-controller")
MANIFESTS = ("kueue.yaml", "jobset.yaml")  # rendered by build-kueue.sh from upstream's config/default
KUEUE_NAMESPACE = "kueue-system"
VISIBILITY_SERVICE = "kueue-visibility-server"  # the name upstream's APIServices point at
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
# Webhooks kept from upstream's manifests: those on Kueue's and JobSet's own objects, and those scoped by an
# objectSelector (JobSet's pod webhooks match only pods carrying jobset.sigs.k8s.io/jobset-name). Kueue's manifests
# also hook every pod, Deployment, StatefulSet and batch Job (namespaceSelector: all but kube-system) with
# failurePolicy Fail for integrations this cluster does not enable: each would put kueue in the path of every
# object the engine makes today, and fail them all while kueue is down.
OWN_GROUPS = frozenset({"kueue.x-k8s.io", "jobset.x-k8s.io"})


def kueue_bin_dir() -> Path:
    """Where build-kueue.sh puts kueue, jobset-controller and manifests/: $PADDLECLOUD_KUEUE_BIN_DIR or the cache."""
    return script_bin_dir("build-kueue.sh", "PADDLECLOUD_KUEUE_BIN_DIR")


def kueue_missing(bin_dir: Path | None = None) -> list[str]:
    """What build-kueue.sh has not built yet (binaries, rendered manifests), as paths."""
    bin_dir = bin_dir or kueue_bin_dir()
    missing = [str(bin_dir / b) for b in KUEUE_BINARIES if not os.access(bin_dir / b, os.X_OK)]
    manifests = bin_dir.parent / "manifests"
    return missing + [str(manifests / m) for m in MANIFESTS if not (manifests / m).is_file()]


def aggregator_args(front_proxy: FrontProxyPki) -> list[str]:
    """kube-apiserver flags of the aggregation layer: who may proxy (requestheader) and the proxy's own client cert."""
    return [
        f"--requestheader-client-ca-file={front_proxy.ca_cert}",
        f"--requestheader-allowed-names={front_proxy.client_name}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={front_proxy.client_cert}",
        f"--proxy-client-key-file={front_proxy.client_key}",
    ]


def _point_at(client_config: dict[str, Any], port: int, ca_bundle: str) -> None:
    """Replace a webhook's in-cluster `service` reference by a URL on 127.0.0.1 (no Service routing here)."""
    path = client_config.pop("service")["path"]
    client_config["url"] = f"https://127.0.0.1:{port}{path}"
    client_config["caBundle"] = ca_bundle


def _kept(webhook: dict[str, Any]) -> bool:
    groups = {g for rule in webhook["rules"] for g in rule["apiGroups"]}
    return groups <= OWN_GROUPS or bool(webhook.get("objectSelector"))


def render(manifest: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """The CRDs and webhook configurations of one rendered manifest, their clientConfigs on 127.0.0.1:port."""
    objects = []
    for obj in yaml.safe_load_all(manifest.read_text()):
        kind = (obj or {}).get("kind")
        if kind == "CustomResourceDefinition":
            conversion = obj["spec"].get("conversion", {})
            if conversion.get("strategy") == "Webhook":
                _point_at(conversion["webhook"]["clientConfig"], port, ca_bundle)
        elif kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            obj["webhooks"] = [w for w in obj["webhooks"] if _kept(w)]
            for webhook in obj["webhooks"]:
                _point_at(webhook["clientConfig"], port, ca_bundle)
        else:
            continue  # Deployments, RBAC, Services, ...: the processes run here, as the cluster admin
        objects.append(obj)
    return objects


def kueue_config(ports: dict[str, int], cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration: JobSets only, queue label required, fair sharing and priority boosts on, no cluster-side
    cert handling."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        # On, it would write its certs into a Secret and patch the webhooks' caBundle for a Service that
        # does not exist here; the test PKI's cert and our own webhook registration replace it.
        "internalCertManagement": {"enable": False},
        # The engine's plain batch Jobs (and anything without the queue label) must run as before.
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["jobset.x-k8s.io/jobset"]},
        # v1beta2 has no `enable`: the section being present turns fair sharing on (cmd/kueue/main.go).
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "visibilityServer": {"bindAddress": "127.0.0.1"},
        # Alpha in v0.17, off by default: a Workload's `kueue.x-k8s.io/priority-boost`, through which the portal
        # makes Kueue stop the job that loses the least work (jobs.scheduling.preemption_cost).
        "featureGates": {"PriorityBoost": True},
        # What Kueue's own manifests ship (config/components/manager/controller_manager_config.yaml), which an
        # operator's install gets: without them the binary's defaults (20 requests a second, one Workload at a
        # time) admitted 1,000 workloads at about 3 a second (bench/kueue_admission.py).
        "clientConnection": {"qps": 50, "burst": 100},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
    }


def jobset_config(ports: dict[str, int], cert_dir: Path) -> dict[str, Any]:
    """JobSet's Configuration: webhooks on 127.0.0.1 with the test PKI's cert, no leader election."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['jobset-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["jobset-webhook"], "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }


PORT_NAMES = (
    "kueue-webhook",
    "kueue-health",
    "kueue-metrics",
    "kueue-visibility",
    "jobset-webhook",
    "jobset-health",
    "jobset-metrics",
)


def probe_jobset(name: str) -> dict[str, Any]:
    """A minimal JobSet (one replicated job of one pod) for a server-side dry-run through every webhook."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "probe:1"}]}
    job = {"parallelism": 1, "completions": 1, "template": {"spec": pod}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "probe", "replicas": 1, "template": {"spec": job}}]},
    }


class KueueControllers:
    """Mixin for TestCluster: installs Kueue and JobSet after the control plane is ready, runs both controllers."""

    work_dir: Path
    kubeconfig_path: Path
    server: str
    token: str
    ca_file: Path
    ports: dict[str, int]
    extra_health_urls: dict[str, str]
    kueue_bin_dir: Path | None

    def api_client(self) -> k8s.ApiClient:
        raise NotImplementedError

    def _spawn(self, name: str, *args: str, exe: Path | None = None, env: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool], what: str = "ready") -> None:
        raise NotImplementedError

    def _http_get(self, url: str) -> bytes:
        raise NotImplementedError

    def _kueue_apiserver_args(self) -> list[str]:
        return aggregator_args(make_front_proxy_pki(self.work_dir / "pki" / "front-proxy"))

    def _start_kueue(self, deadline: float) -> None:
        assert self.kueue_bin_dir is not None
        bin_dir = self.kueue_bin_dir
        self.ports.update(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
        pki = self.work_dir / "pki"
        # One serving cert for both webhook servers, Kueue's visibility API and its metrics, signed by the cluster CA.
        # The SAN <service>.<namespace>.svc is the server name the aggregator checks (it names the Service, not a URL).
        cert_dir = pki / "kueue"
        names = [f"{VISIBILITY_SERVICE}.{KUEUE_NAMESPACE}.svc", "localhost"]
        issue_serving_cert(pki / "ca.crt", pki / "ca.key", cert_dir, ["127.0.0.1"], names)
        # build-kueue.sh points kueue's visibility and metrics certs at kueue-certs/..., relative to its working
        # directory (ours): upstream's fixed paths are mounted Secrets in its Deployment.
        for use in ("visibility", "metrics"):
            shutil.copytree(cert_dir, self.work_dir / "kueue-certs" / use, dirs_exist_ok=True)
        ca_bundle = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
        manifests = bin_dir.parent / "manifests"
        with self.api_client() as api:
            self._install(api, render(manifests / "jobset.yaml", self.ports["jobset-webhook"], ca_bundle), deadline)
            self._install(api, render(manifests / "kueue.yaml", self.ports["kueue-webhook"], ca_bundle), deadline)
            namespace: Any = {"metadata": {"name": KUEUE_NAMESPACE}}  # dict bodies are accepted
            k8s.CoreV1Api(api).create_namespace(namespace)  # its ExternalName Service for the visibility API
        for name, config in (
            ("jobset-controller", jobset_config(self.ports, cert_dir)),
            ("kueue", kueue_config(self.ports, cert_dir)),
        ):
            path = self.work_dir / f"{name}-config.yaml"
            path.write_text(yaml.safe_dump(config))
            args = [f"--config={path}", f"--kubeconfig={self.kubeconfig_path}"]
            if name == "kueue":
                args.append(f"--visibility-server-port={self.ports['kueue-visibility']}")
            self._spawn(name, *args, exe=bin_dir / name)
            short = name.split("-")[0]
            self.extra_health_urls[name] = f"http://127.0.0.1:{self.ports[f'{short}-health']}/readyz"
        for name in ("jobset-controller", "kueue"):
            self._wait(name, deadline, functools.partial(self._answers_ok, self.extra_health_urls[name]))
        with self.api_client() as api:
            custom = k8s.CustomObjectsApi(api)
            # Both processes' webhooks answer (JobSet's defaulting and validation, Kueue's for its integration).
            probe = "a JobSet dry-run passing the webhooks"
            self._wait("kueue", deadline, lambda: self._dry_run_jobset(custom), what=probe)
            self._register_visibility(api, ca_bundle)
            apireg = k8s.ApiregistrationV1Api(api)
            available = f"APIService v1beta2.{VISIBILITY_GROUP} Available"
            self._wait("kueue", deadline, lambda: _available(apireg), what=available)

    def _answers_ok(self, url: str) -> bool:
        return self._http_get(url) == b"ok"

    def pending_workloads(self, path: str) -> list[dict[str, Any]]:
        """Items of Kueue's `pendingworkloads` summary for `clusterqueues/<cq>` or `namespaces/<ns>/localqueues/<lq>`,
        read through the API server (the aggregation layer proxies it to kueue's visibility server)."""
        url = f"{self.server}/apis/{VISIBILITY_GROUP}/v1beta2/{path}/pendingworkloads"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})  # noqa: S310
        https = urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(self.ca_file)))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), https)
        with opener.open(request, timeout=10) as response:
            return list(json.load(response)["items"])

    def _install(self, api: k8s.ApiClient, objects: list[dict[str, Any]], deadline: float) -> None:
        ext = k8s.ApiextensionsV1Api(api)
        admission = k8s.AdmissionregistrationV1Api(api)
        crds = []
        for obj in objects:
            if obj["kind"] == "CustomResourceDefinition":
                ext.create_custom_resource_definition(obj)  # type: ignore[arg-type]  # dict bodies are accepted
                crds.append(obj["metadata"]["name"])
            elif obj["kind"] == "MutatingWebhookConfiguration":
                admission.create_mutating_webhook_configuration(obj)  # type: ignore[arg-type]  # dict bodies are accepted
            else:
                admission.create_validating_webhook_configuration(obj)  # type: ignore[arg-type]  # dict bodies are accepted

        def established() -> bool:
            for name in crds:
                status = ext.read_custom_resource_definition(name).status
                conditions = (status.conditions if status else None) or []
                if not any(c.type == "Established" and c.status == "True" for c in conditions):
                    return False
            return True

        self._wait("kube-apiserver", deadline, established, what="Kueue/JobSet CRDs Established")

    @staticmethod
    def _dry_run_jobset(custom: k8s.CustomObjectsApi) -> bool:
        try:
            custom.create_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", probe_jobset("webhook-probe"), dry_run="All"
            )
        except ApiException as exc:
            if exc.status in (500, 502, 503, 504):  # "failed calling webhook": not serving yet
                return False
            raise
        return True

    def _register_visibility(self, api: k8s.ApiClient, ca_bundle: str) -> None:
        """APIServices for Kueue's visibility API through an ExternalName Service naming 127.0.0.1.

        The aggregator resolves an APIService's Service to its ClusterIP (nothing routes that here: no kube-proxy)
        or, with --enable-aggregator-routing, to its endpoints, which may not be loopback addresses. For an
        ExternalName Service it dials <externalName>:<APIService port> directly (apiserver's proxy.ResolveCluster).
        """
        service: Any = {  # dict bodies are accepted; the client's annotations name only its model classes
            "metadata": {"name": VISIBILITY_SERVICE},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        }
        k8s.CoreV1Api(api).create_namespaced_service(KUEUE_NAMESPACE, service)
        apireg = k8s.ApiregistrationV1Api(api)
        target = {"namespace": KUEUE_NAMESPACE, "name": VISIBILITY_SERVICE, "port": self.ports["kueue-visibility"]}
        for version in ("v1beta1", "v1beta2"):
            api_service: Any = {
                "metadata": {"name": f"{version}.{VISIBILITY_GROUP}"},
                "spec": {
                    "group": VISIBILITY_GROUP,
                    "version": version,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                    "caBundle": ca_bundle,
                    "service": target,
                },
            }
            apireg.create_api_service(api_service)


def _available(apireg: k8s.ApiregistrationV1Api) -> bool:
    status = apireg.read_api_service(f"v1beta2.{VISIBILITY_GROUP}").status
    return any(c.type == "Available" and c.status == "True" for c in ((status.conditions if status else None) or []))
