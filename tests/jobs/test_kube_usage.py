"""jobs/engines/kubernetes/usage.py without a cluster: a kubelet summary parsed (kubelet_summary.json is what the
test node's kubelet 1.36 served for one busy pod at /stats/summary?only_cpu_and_memory=true), and the reads
bounded: one per node per period, failures remembered and logged once, refused or oversized answers dropped.
Only the connection pool is stood in for (what a kubelet answers); tests/k8s/test_usage_pods.py reads a real one."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s

from jobs.engines.kubernetes import usage
from jobs.engines.kubernetes.client import Kube

SUMMARY = json.loads((Path(__file__).parent / "kubelet_summary.json").read_text())
NS = "usage-f07e7a"  # the recorded pod's


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    usage.forget()
    yield
    usage.forget()


def pod(name: str, ip: str = "10.0.0.5", phase: str = "Running", ns: str = NS) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "status": {"phase": phase, "hostIP": ip}}


def summary_with(*names: str) -> dict[str, Any]:
    """The recorded summary with copies of its pod under other names (more pods on the same node)."""
    summary: dict[str, Any] = copy.deepcopy(SUMMARY)
    for name in names:
        entry = copy.deepcopy(SUMMARY["pods"][0])
        entry["podRef"]["name"] = name
        summary["pods"].append(entry)
    return summary


def test_cpu_is_cores_from_nanocores_and_memory_the_pods_working_set() -> None:
    busy = usage.parse_summary(SUMMARY)[(NS, "busy")]
    assert busy == {"cpu_cores": 0.602007515, "memory_bytes": 71_237_632, "gpu_util": None, "gpu_memory_bytes": None}


def test_a_pod_without_pod_level_figures_sums_its_containers() -> None:
    summary = copy.deepcopy(SUMMARY)
    entry = summary["pods"][0]
    del entry["cpu"], entry["memory"]
    entry["containers"].append({"name": "side", "cpu": {"usageNanoCores": 1_000_000}, "memory": {"workingSetBytes": 5}})
    busy = usage.parse_summary(summary)[(NS, "busy")]
    assert busy["cpu_cores"] == pytest.approx(0.555245884 + 0.001)
    assert busy["memory_bytes"] == 70_246_400 + 5


def test_a_pod_the_kubelet_has_no_figures_for_yet_is_left_out() -> None:
    summary = copy.deepcopy(SUMMARY)
    entry = summary["pods"][0]
    del entry["cpu"], entry["memory"]
    entry["containers"] = []
    assert usage.parse_summary(summary) == {}


@pytest.mark.parametrize(
    "summary",
    [
        None,
        [],
        "pods",
        {"pods": None},
        {"pods": [None, 3, "x", {"podRef": "busy"}, {"podRef": {"name": 5, "namespace": NS}}]},
        {"pods": [{"podRef": {"name": "p", "namespace": NS}, "cpu": {"usageNanoCores": -1}, "memory": "x"}]},
        {"pods": [{"podRef": {"name": "p", "namespace": NS}, "cpu": {"usageNanoCores": True}, "containers": {}}]},
    ],
)
def test_malformed_summaries_give_nothing_and_never_raise(summary: Any) -> None:
    assert usage.parse_summary(summary) == {}


class FakeResponse:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def read(self, amount: int) -> bytes:
        return self.body[:amount]

    def release_conn(self) -> None:
        pass


class FakePool:
    """Stands in for the connection pool alone (what a kubelet answers); the client and its credentials are real."""

    def __init__(self, status: int = 200, body: bytes = b"", error: Exception | None = None) -> None:
        self.status, self.body, self.error = status, body, error
        self.urls: list[str] = []
        self.headers: list[dict[str, str]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        self.urls.append(url)
        self.headers.append(kwargs["headers"])
        if self.error:
            raise self.error
        return FakeResponse(self.status, self.body)


def kube_with(pool: FakePool) -> Kube:
    conf = k8s.Configuration(host="https://api.example:6443", api_key={"BearerToken": "t0ken"})
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    api = k8s.ApiClient(conf)
    api.rest_client.pool_manager = pool  # type: ignore[assignment]  # answers as a kubelet would
    return Kube(api)


def test_one_summary_read_per_node_serves_every_pod_on_it_for_a_period() -> None:
    pool = FakePool(body=json.dumps(summary_with("ps-0", "ps-1")).encode())
    portal = kube_with(pool)
    pods = [pod("busy"), pod("ps-0"), pod("ps-1"), pod("other", ip="10.0.0.6"), pod("done", phase="Succeeded")]
    found = usage.read_pods_usage(portal, 10250, pods)
    assert set(found) == {"busy", "ps-0", "ps-1"}  # "other"'s node does not list it; "done" is not read
    assert usage.read_pod_usage(portal, "10.0.0.5", 10250, NS, ["busy", "missing"]) == {"busy": found["busy"]}
    query = "/stats/summary?only_cpu_and_memory=true"
    assert sorted(pool.urls) == [f"https://10.0.0.5:10250{query}", f"https://10.0.0.6:10250{query}"]
    assert pool.headers[0]["Authorization"] == "Bearer t0ken"  # the datacenter's own credentials


def test_an_unreachable_kubelet_gives_nothing_one_line_and_is_not_retried_within_the_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = FakePool(error=urllib3.exceptions.ConnectTimeoutError("connect timed out"))
    portal = kube_with(pool)
    with caplog.at_level(logging.WARNING, logger=usage.__name__):
        assert usage.read_pods_usage(portal, 10250, [pod("busy")]) == {}
        assert usage.read_pods_usage(portal, 10250, [pod("gpu")]) == {}
    assert len(pool.urls) == 1
    assert caplog.text.count("no worker usage from the kubelet at https://10.0.0.5:10250") == 1


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (403, b"Forbidden (user=x, verb=get, resource=nodes, subresource=stats)", "answered 403 'Forbidden (user"),
        (200, b"<html>", "not JSON"),
        (200, b" " * (usage.MAX_SUMMARY_BYTES + 1), "over"),
    ],
)
def test_a_refused_garbled_or_oversized_answer_gives_nothing_and_says_why(
    status: int, body: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=usage.__name__):
        assert usage.read_pods_usage(kube_with(FakePool(status, body)), 10250, [pod("busy")]) == {}
    assert why in caplog.text


def test_an_ipv6_node_address_is_bracketed() -> None:
    pool = FakePool(body=b"{}")
    usage.read_pod_usage(kube_with(pool), "fd00::5", 10250, NS, ["busy"])
    assert pool.urls == ["https://[fd00::5]:10250/stats/summary?only_cpu_and_memory=true"]
