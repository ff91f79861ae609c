"""Where Kueue holds each waiting job: the `pendingworkloads` of each user's ClusterQueue (Kueue's visibility API).

One GET per ClusterQueue (a user's namespace), at most MAX_QUEUES of them and MAX_WORKLOADS workloads each per
call, all within BUDGET_SECONDS, each answer kept CACHE_SECONDS: a queue page polled by many users asks the API
server a few times a minute.
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
# A page waits on these reads: each may take CALL_TIMEOUT (connect, read) seconds, and once BUDGET_SECONDS have
# gone by the queues not read yet get no position this time (and are read by a later call), so a slow or hung
# API server costs a page a few seconds at most, never MAX_QUEUES x the client's usual 30 s.
CALL_TIMEOUT = (2, 3)
BUDGET_SECONDS = 4.0
FORGET_SECONDS = 300.0  # an answer this old is dropped rather than shown

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
        query = [("limit", str(MAX_WORKLOADS))]
        answer = client().get(KIND, None, cluster_queue, "pendingworkloads", query=query, timeout=CALL_TIMEOUT)
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
    `client` is called only when some queue must be read (building it may fail too: no position then).

    Queues are read least recently read first, so when the budget runs out every queue still gets its turn over
    the next calls; a queue whose answer is stale and not read again this time keeps its last positions."""
    queues = sorted(set(cluster_queues))[:MAX_QUEUES]
    began = clock()
    with _lock:
        known = {queue: _cache[(datacenter_id, queue)] for queue in queues if (datacenter_id, queue) in _cache}
    read_at = {queue: known[queue][0] if queue in known else float("-inf") for queue in queues}
    for queue in sorted((q for q in queues if began - read_at[q] > CACHE_SECONDS), key=read_at.__getitem__):
        if clock() - began > BUDGET_SECONDS:
            break  # out of time for this call: the rest are read first next time
        answer = known[queue] = (clock(), _read(client, queue))
        with _lock:
            _cache[(datacenter_id, queue)] = answer
    with _lock:
        _forget_stale(clock())
    result: Positions = {}
    for _, positions_of_queue in known.values():
        result.update(positions_of_queue)
    return result


def _forget_stale(now: float) -> None:
    """Drop answers long past their time (a queue nobody looks at any more), so the cache holds only queues read
    lately; a stale answer is kept a while to be shown while its queue waits its turn (called with the lock held)."""
    for key in [key for key, (read_at, _) in _cache.items() if now - read_at > FORGET_SECONDS]:
        del _cache[key]
