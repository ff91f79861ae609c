"""The NetworkPolicies enforced on the real node (kube-router's policy controller, tools/k8s/build-netpol.sh):
bob's job finds alice's pserver by DNS but cannot open its ports, nor a service in a namespace like the
portal's, nor a listener on the node's host, while alice's 2 pservers + 2 trainers train to `succeeded`.
A pod in a namespace without policies reaches the same listeners: what stops bob is the policies, in force from
his job's first line on: its launcher waits until they hold his new pod (paddlecloud/runtime/isolation.py)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.kubernetes import manifests as m
from tests.k8s.test_pods import EXAMPLES, done, log_of, pods_dc, put, state_of, submit, worker  # noqa: F401
from tests.wait import wait_for
from tests.workers import WorkerProcess
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster

pytestmark = [pytest.mark.pods, pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True)]

# Run in the pods (the runtime image's Python): what an attacker inside a job would try.
PROBE = """\
import json, os, socket

def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=3):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as exc:
        return f"error {exc.errno}"

def resolve(name):
    try:
        return socket.gethostbyname(name)
    except OSError as exc:
        return f"error {exc}"

targets = json.loads(os.environ["PROBE_TARGETS"])
result = {
    "connect": {key: connect(host, port) for key, (host, port) in targets.items()},
    "resolve": {name: resolve(name) for name in json.loads(os.environ.get("PROBE_NAMES", "[]"))},
}
print("PROBE " + json.dumps(result, sort_keys=True), flush=True)
"""


def probe_result(text: str) -> dict[str, Any] | None:
    match = re.search(r"^PROBE (\{.*\})$", text, re.MULTILINE)
    return json.loads(match.group(1)) if match else None


def reachable(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=2):
        return True
    return False


class Listener:
    """A TCP listener on every address of this host (a stand-in for any host service); records its peers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))  # noqa: S104  # every host address is a target
        self.port = self.sock.getsockname()[1]
        self.peers: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, peer = self.sock.accept()
                self.peers.append(peer[0])
                conn.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    result = Listener()
    yield result
    result.sock.close()


def pod_ip(core: k8s.CoreV1Api, ns: str, name: str) -> str | None:
    status = core.read_namespaced_pod(name, ns).status
    return status.pod_ip if status and status.phase == "Running" else None


def finished_pod(core: k8s.CoreV1Api, ns: str, name: str) -> bool:
    status = core.read_namespaced_pod(name, ns).status
    return bool(status and status.phase in ("Succeeded", "Failed"))


def bare_pod(name: str, image: str, command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    variables = [{"name": k, "value": v} for k, v in (env or {}).items()]
    container = {"name": "c", "image": image, "command": command, "env": variables}
    spec = {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [container]}
    return {"metadata": {"name": name}, "spec": spec}


def pods_of(core: k8s.CoreV1Api, uid: str, role: str) -> list[Any]:
    selector = f"paddlecloud.org/job={uid},paddlecloud.org/role={role}"
    return sorted(core.list_pod_for_all_namespaces(label_selector=selector).items, key=lambda p: p.metadata.name)


def test_bob_cannot_open_alices_pserver_nor_the_portals_namespace_nor_the_host_while_alice_trains(
    alice_api: APIClient,
    bob_api: APIClient,
    alice: User,
    bob: User,
    pods_dc: Datacenter,  # noqa: F811
    k8s_node_cluster: TestCluster,
    worker: WorkerProcess,  # noqa: F811
    listener: Listener,
    tmp_path: Path,
) -> None:
    manifest = read_manifest()
    assert manifest is not None
    image = manifest["runtime"]["ref"]
    runner = k8s_node_cluster.node_runner
    assert runner is not None
    # The node's address (the bridge's, where CoreDNS and the kubelet listen): the host as pods see it.
    # (The host's other addresses have no route from the test node's pods at all.)
    node_ip = runner.node.gateway
    # A namespace like the portal's (no policies of ours) with a service in it, and a pod there that
    # probes the same listeners: they are reachable where no policy applies.
    portal_ns = f"portal-{uuid.uuid4().hex[:6]}"
    with k8s_node_cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": portal_ns}})
        try:
            k8s_node_cluster.wait_for_default_service_account(portal_ns)
            core.create_namespaced_pod(portal_ns, bare_pod("svc", image, ["python", "-m", "http.server", "8080"]))
            svc_ip = wait_for(lambda: pod_ip(core, portal_ns, "svc"), "the portal-like service's pod", 120)
            wait_for(lambda: reachable(svc_ip, 8080), "the portal-like service to listen", 60)
            host_targets = {"host": (node_ip, listener.port)}
            control_env = {"PROBE_TARGETS": json.dumps({"portal svc": (svc_ip, 8080), **host_targets})}
            core.create_namespaced_pod(portal_ns, bare_pod("control", image, ["python", "-c", PROBE], control_env))
            wait_for(lambda: finished_pod(core, portal_ns, "control"), "the control pod to finish", 120)
            control = probe_result(core.read_namespaced_pod_log("control", portal_ns))
            assert control is not None
            assert set(control["connect"].values()) == {"open"}, control  # reachable without policies

            # Alice trains: her pservers' ports are alive (the node may reach its pods).
            put(pods_dc, alice, "fit", EXAMPLES / "fit_a_line")
            spec = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 600}
            alice_job = submit(alice_api, pods_dc, spec)
            wait_for(lambda: state_of(alice_job, "running", "succeeded", "failed"), "running", 240, watch=worker)
            ps0 = wait_for(lambda: _ps0_ip(core, alice_job.uid), "alice's pserver 0", 120, watch=worker)
            wait_for(lambda: reachable(ps0, m.PSERVER_PORT), "alice's pserver to listen", 120, watch=worker)
            alice_ns = pods_of(core, alice_job.uid, "pserver")[0].metadata.namespace
            ps0_name = f"{alice_job.uid}-ps-0.{alice_job.uid}.{alice_ns}.svc.cluster.local"

            # Bob's job tries everything an attacker inside a job would.
            package = tmp_path / "probe"
            package.mkdir()
            (package / "probe.py").write_text(PROBE)
            put(pods_dc, bob, "probe", package)
            targets = {
                "alice pserver": (ps0, m.PSERVER_PORT),
                "alice gloo": (ps0, m.GLOO_PORT),
                "portal svc": (svc_ip, 8080),
                **host_targets,
            }
            env = {"PROBE_TARGETS": json.dumps(targets), "PROBE_NAMES": json.dumps([ps0_name])}
            probe_spec = {"jobname": "probe", "entry": "python probe.py", "parallelism": 1, "pservers": 0, "env": env}
            probe_job = submit(bob_api, pods_dc, probe_spec)
            probed = lambda: probe_result(log_of(bob_api, "probe", "trainer-0").get("text", ""))  # noqa: E731
            result = wait_for(probed, "bob's probe to report", 240, watch=worker)
            print(f"bob's probe: {result}")
            # His pod is new: its launcher ran the probe only once kube-router's rules held it (isolation.py).
            text = log_of(bob_api, "probe", "trainer-0").get("text", "")
            print("bob's launcher:", re.findall(r"network isolation in force after \S+", text) or "no wait needed")
            bob_pods = {p.status.pod_ip for p in pods_of(core, probe_job.uid, "trainer")}
            assert result["resolve"] == {ps0_name: ps0}  # DNS works in the job, and finds alice's pserver
            blocked = {key: state for key, state in result["connect"].items() if state == "open"}
            assert not blocked, f"bob's job reached {blocked}"
            assert not bob_pods & set(listener.peers), listener.peers
            # Not by luck: alice's pserver still listened after bob's attempts, and she trains to the end.
            assert reachable(ps0, m.PSERVER_PORT), "alice's pserver was gone before bob's probe ended"
            alice_job = wait_for(lambda: done(alice_job), "alice's job released", 400, watch=worker)
            assert (alice_job.state, alice_job.exit_code) == ("succeeded", 0), alice_job.message
            probe_job = wait_for(lambda: done(probe_job), "bob's probe released", 120, watch=worker)
            assert probe_job.state == "succeeded", probe_job.message
        finally:
            core.delete_namespace(portal_ns)


def _ps0_ip(core: k8s.CoreV1Api, uid: str) -> str | None:
    pods = pods_of(core, uid, "pserver")
    running = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip]
    return running[0].status.pod_ip if running and running[0].metadata.name.endswith("-ps-0") else None
