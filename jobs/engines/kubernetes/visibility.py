"""Where Kueue holds each waiting job: the `pendingworkloads` of each user's ClusterQueue (Kueue's visibility API).

One GET per ClusterQueue (a user's namespace), at most MAX_QUEUES of them and MAX_WORKLOADS workloads each per
call, each answer kept CACHE_SECONDS: a queue page polled by many users asks the API server a few times a minute.
Any error (no visibility API, no RBAC, the server down) gives no positions for that queue: a page never fails on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from jobs.engines.kubernetes import client as kube

log = logging.getLogger(__name__)

KIND = "ClusterQueueVisibility"
CACHE_SECONDS = 5.0
MAX_QUEUES = 50  # users' ClusterQueues read per call; the rest get no position this time
MAX_WORKLOADS = 500  # pending workloads read per ClusterQueue: a job further back gets no position

Positions = dict[str, int]  # job uid -> 1-based position in its owner's ClusterQueue

_cache: dict[tuple[int, str], tuple[float, Positions]] = {}
_lock = threading.Lock()


def positions(items: Iterable[dict[str, Any]]) -> Positions:
    """Job uid -> 1-based position from a `pendingworkloads` answer's items (Kueue counts from 0).

    A Workload is matched to its job by its owning JobSet, whose name is the job's uid. A requeued job's new
    JobSet has its predecessor's name; should both Workloads be listed a moment, the newer one counts."""
    found: dict[str, tuple[str, int]] = {}
    for item in items:
        meta = item.get("metadata") or {}
        created = str(meta.get("creationTimestamp") or "")
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") != "JobSet" or not ref.get("name"):
                continue
            position = item.get("positionInClusterQueue")
            if not isinstance(position, int) or position < 0:
                continue
            uid = str(ref["name"])
            if uid not in found or created >= found[uid][0]:
                found[uid] = (created, position + 1)
    return {uid: position for uid, (_, position) in found.items()}


def _read(client: Callable[[], kube.Kube], cluster_queue: str) -> Positions:
    try:
        answer = client().get(KIND, None, cluster_queue, "pendingworkloads", query=[("limit", str(MAX_WORKLOADS))])
    except Exception as exc:  # whatever goes wrong, the page shows no position rather than a 500
        log.info("no queue positions from Kueue for %s: %s", cluster_queue, exc)
        return {}
    items = answer.get("items")
    return positions(items if isinstance(items, list) else [])


def queue_positions(
    datacenter_id: int,
    client: Callable[[], kube.Kube],
    cluster_queues: Iterable[str],
    clock: Callable[[], float] = time.monotonic,
) -> Positions:
    """The positions of the pending workloads of these ClusterQueues (the first MAX_QUEUES, sorted), cached;
    `client` is called only when some queue must be read (building it may fail too: no position then)."""
    result: Positions = {}
    for cluster_queue in sorted(set(cluster_queues))[:MAX_QUEUES]:
        key = (datacenter_id, cluster_queue)
        now = clock()
        with _lock:
            cached = _cache.get(key)
        if cached is None or now - cached[0] > CACHE_SECONDS:
            cached = (now, _read(client, cluster_queue))
            with _lock:
                _cache[key] = cached
                _forget_stale(now)
        result.update(cached[1])
    return result


def _forget_stale(now: float) -> None:
    """Drop answers past their time, so the cache holds only queues read lately (called with the lock held)."""
    for key in [key for key, (read_at, _) in _cache.items() if now - read_at > CACHE_SECONDS]:
        del _cache[key]
