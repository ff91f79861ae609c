"""When each worker of a job really held its pods, read from the pods (pure): what the ledger charges on Kubernetes.

The local engine's ledger runs from each process's start to the job's end; here the same times come from
the pods themselves, not from when the reconciler happened to look: a worker's span starts at its first
pod's container start (the pod's startTime before the container started) and ends at its last pod's
container finishedAt. A worker still running has no end yet: the ledger then ends it with the job.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from paddlecloud.contract.states import worker_name
from paddlecloud.contract.units import parse_time

from jobs.engines.kubernetes.pods import Obj, by_worker, container_status

Span = tuple[datetime | None, datetime | None]


def pod_span(pod: Obj) -> Span:
    """(when its container first started, when its current container finished, None while it runs)."""
    status = container_status(pod)
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated") or {}
    current = state.get("running") or state.get("terminated") or {}
    starts = [t for t in (parse_time(last.get("startedAt")), parse_time(current.get("startedAt"))) if t]
    start = min(starts) if starts else parse_time((pod.get("status") or {}).get("startTime"))
    end = parse_time((state.get("terminated") or {}).get("finishedAt"))
    return start, end


def worker_spans(pods: Iterable[Obj]) -> dict[str, Span]:
    """Worker name -> (first start, last end) over its pods; end None while one of them has not finished."""
    spans: dict[str, Span] = {}
    for (role, index), attempts in by_worker(pods).items():
        ran = [(start, end) for start, end in map(pod_span, attempts) if start]  # a pod never started held nothing
        if not ran:
            continue
        ends = [end for _, end in ran]
        last = None if None in ends else max(end for end in ends if end)
        spans[worker_name(role, index)] = (min(start for start, _ in ran), last)
    return spans


def to_json(spans: dict[str, Span]) -> dict[str, list[str | None]]:
    """As kept in a job's engine_data (read back by from_json)."""
    return {name: [t.isoformat() if t else None for t in span] for name, span in spans.items()}


def from_json(kept: object) -> dict[str, Span]:
    if not isinstance(kept, dict):
        return {}
    return {
        str(name): (parse_time(span[0]), parse_time(span[1]))
        for name, span in kept.items()
        if isinstance(span, list) and len(span) == 2
    }
