"""Positions from Kueue's visibility API (jobs/engines/kubernetes/visibility.py): the pure mapping, and the cache that
keeps a failing or slow API server from failing or slowing a page."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.engines.base import TransientEngineError
from jobs.engines.kubernetes import visibility


def pending(jobset: str, position: int, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """One item of a `pendingworkloads` answer, as Kueue v0.17 writes it (owner references kept, positions from 0)."""
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": jobset, "uid": f"k8s-{jobset}"}
    meta = {"name": f"jobset-{jobset}-x", "namespace": "paddle-alice", "ownerReferences": [owner],
            "creationTimestamp": created}  # fmt: skip
    return {"metadata": meta, "priority": 0, "localQueueName": "paddlecloud", "positionInClusterQueue": position,
            "positionInLocalQueue": position}  # fmt: skip


def test_a_workload_maps_to_its_job_by_the_owning_jobsets_name_and_positions_count_from_1() -> None:
    stray = {"metadata": {"ownerReferences": [{"kind": "Job", "name": "other"}]}, "positionInClusterQueue": 0}
    items = [pending("fit-b", 1), pending("fit-a", 0), stray, {"positionInClusterQueue": 2}]
    assert visibility.positions(items) == {"fit-a": 1, "fit-b": 2}


def test_a_requeued_jobs_newer_workload_wins_over_its_lingering_predecessor() -> None:
    items = [pending("fit-a", 0, "2026-01-01T00:00:00Z"), pending("fit-a", 3, "2026-01-01T00:05:00Z")]
    assert visibility.positions(items) == {"fit-a": 4}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    visibility._cache.clear()


def test_answers_are_cached_briefly_and_an_unreachable_api_gives_no_positions() -> None:
    calls: list[str] = []

    class Answering:
        def get(self, kind: str, namespace: str | None, name: str, sub: str = "", query: Any = None,
                timeout: Any = None) -> Any:  # fmt: skip
            assert timeout == visibility.CALL_TIMEOUT  # short: a page waits on it
            calls.append(f"{name}/{sub}?{query}")
            if name == "paddle-bob":
                raise TransientEngineError("cannot reach the Kubernetes API server")
            return {"items": [pending("fit-a", 0)]}

    clock = FakeClock()

    def read() -> dict[str, int]:
        client: Any = Answering()
        return visibility.queue_positions(1, lambda: client, ["paddle-alice", "paddle-bob"], clock)

    assert read() == {"fit-a": 1}
    assert calls == [f"paddle-alice/pendingworkloads?[('limit', '{visibility.MAX_WORKLOADS}')]",
                     f"paddle-bob/pendingworkloads?[('limit', '{visibility.MAX_WORKLOADS}')]"]  # fmt: skip
    assert read() == {"fit-a": 1} and len(calls) == 2  # within CACHE_SECONDS: no call, the failure included
    clock.now += visibility.CACHE_SECONDS + 1
    assert read() == {"fit-a": 1} and len(calls) == 4


def test_a_client_that_cannot_be_built_gives_no_positions() -> None:
    def broken() -> Any:
        raise RuntimeError("no kubeconfig")

    assert visibility.queue_positions(1, broken, ["paddle-alice"]) == {}


def test_a_slow_api_server_costs_a_call_its_budget_and_the_queues_left_are_read_next_time() -> None:
    clock = FakeClock()
    read_queues: list[str] = []

    class Slow:
        def get(self, kind: str, namespace: str | None, name: str, sub: str = "", query: Any = None,
                timeout: Any = None) -> Any:  # fmt: skip
            read_queues.append(name)
            clock.now += 3  # each answer takes 3 s
            return {"items": [pending(f"job-of-{name}", 0)]}

    client: Any = Slow()
    queues = ["paddle-a", "paddle-b", "paddle-c", "paddle-d"]
    first = visibility.queue_positions(1, lambda: client, queues, clock)
    # 3 s in, the budget (4 s) not spent: one more read; 6 s in, spent: the other two wait for the next call.
    assert read_queues == ["paddle-a", "paddle-b"] and set(first) == {"job-of-paddle-a", "job-of-paddle-b"}
    second = visibility.queue_positions(1, lambda: client, queues, clock)
    # Never read first: c and d now; a and b (stale) keep their last positions meanwhile.
    assert read_queues[2:] == ["paddle-c", "paddle-d"]
    assert set(second) == {f"job-of-{queue}" for queue in queues}
