"""A datacenter's pods, Jobs, StatefulSets and FailedCreate events, mirrored in memory by watching them.

Listing them every reconcile cycle cost three calls and most of a cycle decoding megabytes of JSON
(bench/reconcile_scale.py: 7.5 s a cycle at 5,000 jobs). A mirror lists each kind once, then watches
from the list's resourceVersion (bookmarks keep it fresh while nothing changes), and lists again only
when the API server answers 410 Gone (it no longer keeps that version) or three watches in a row
fail. A steady cluster costs no list call per cycle, and a change reaches the handler as soon as the
API server sends it: the control worker reconciles that job's datacenter at once (jobs/follow/listener.py).

Mirrors run only in a process that enabled them (the control worker, at start; tests and benchmarks
that ask); elsewhere `mirror_for` answers None and the engine lists as before. A mirror is trusted
only while every one of its watches is open: while one is broken the engine lists too, so a stale
mirror never stands in for the cluster. One nobody asked for in IDLE_SECONDS stops, and at most
MAX_MIRRORS run in a process, so the threads and connections a process holds stay bounded. Their
requests are counted in WATCH_CALLS, apart from the reconciler's own (client.CALLS).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jobs.engines.base import TransientEngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names

log = logging.getLogger(__name__)

WATCH_SECONDS = 60  # each watch is re-opened (from the version it reached) after this long
IDLE_SECONDS = 300  # a mirror no poll asked for in this long stops
MAX_MIRRORS = 16  # per process: past this, the least recently used mirror stops
RELIST_AFTER_FAILURES = 3  # watches failing in a row before the informer lists again
COALESCE_SECONDS = 0.05  # changes arriving together are handed on together
MAX_COUNTED_JOBS = 100_000  # past this many jobs' last changes, a mirror starts afresh (a new serial)
WATCH_CALLS: Counter[str] = Counter()  # the mirrors' requests ("LIST Pod", "WATCH Pod"), apart from CALLS

Obj = dict[str, Any]


@dataclass(frozen=True)
class Source:
    """What one informer follows: a kind, in every namespace, with these selectors."""

    kind: str
    label_selector: str = ""
    field_selector: str = ""


def sources(datacenter_selector: str, kueue: bool = False) -> tuple[Source, ...]:
    """The kinds a datacenter's poll reads (engine._poll), with the selectors it lists them by. JobSets and
    Workloads only where Kueue admits the jobs: elsewhere their CRDs may be missing, and an informer of a
    kind the cluster lacks would never be live (the mirror never ready)."""
    common = (
        Source("Pod", datacenter_selector),
        Source("Job", datacenter_selector),
        Source("StatefulSet", datacenter_selector),
        Source("Event", field_selector="reason=FailedCreate"),
    )
    # Kueue does not copy the JobSet's labels onto its Workload: all of them (matched by owner, kueue.py).
    return common + ((Source("JobSet", datacenter_selector), Source("Workload")) if kueue else ())


def job_of(obj: Obj) -> str:
    """The uid of the portal job an object belongs to ("" for none): its job label, or for a Workload (which
    carries no label of ours) the JobSet owning it, which is named after the job."""
    meta = obj.get("metadata") or {}
    job_uid = (meta.get("labels") or {}).get(names.JOB_LABEL)
    if not job_uid:
        owners = meta.get("ownerReferences") or []
        job_uid = next((ref.get("name") for ref in owners if ref.get("kind") == "JobSet"), None)
    return str(job_uid or "")


def _slim(obj: Obj) -> Obj:
    # managedFields are often half of an object's JSON, and nothing here reads them.
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


class Informer:
    """One source's objects by uid, kept current by one thread: list, then watch; list again on 410 Gone."""

    def __init__(self, client: kube.Kube, source: Source, changed: Callable[[Obj], None], stop: threading.Event):
        self.client, self.source = client, source
        self._changed, self._stop = changed, stop
        self._objects: dict[str, Obj] = {}
        # The same objects by the job they belong to: a cycle over a few jobs reads only theirs, however
        # many the datacenter runs (the objects of no job are only in _objects).
        self._by_job: dict[str, dict[str, Obj]] = {}
        self._lock = threading.Lock()
        self._stream: kube.WatchStream | None = None
        self.version = ""  # the resourceVersion the objects are current at; "" lists again
        self.live = False  # listed, and its watch open: the objects are as current as the API server's
        self.lists = 0

    def items(self, job_uids: Iterable[str] | None = None) -> list[Obj]:
        """Every object, or only those of these jobs."""
        with self._lock:
            if job_uids is None:
                return list(self._objects.values())
            return [obj for uid in job_uids for obj in self._by_job.get(uid, {}).values()]

    def _put(self, uid: str, obj: Obj) -> None:
        self._drop(uid)
        self._objects[uid] = obj
        job_uid = job_of(obj)
        if job_uid:
            self._by_job.setdefault(job_uid, {})[uid] = obj

    def _drop(self, uid: str) -> None:
        old = self._objects.pop(uid, None)
        job_uid = job_of(old) if old is not None else ""
        its = self._by_job.get(job_uid)
        if its is not None:
            its.pop(uid, None)
            if not its:
                del self._by_job[job_uid]

    def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if not self.version:
                    self._list()
                opened = time.monotonic()
                if not self._follow() and time.monotonic() - opened < 1.0 and not self._stop.is_set():
                    raise TransientEngineError("the watch ended at once, with nothing")
                failures = 0
            except kube.Gone:
                log.info("watch of %s: version %s is gone; listing again", self.source.kind, self.version)
                self.live = False  # stale until the list is in
                self.version = ""
            except (TransientEngineError, kube.KubeError) as exc:
                self.live = False
                failures += 1
                if failures >= RELIST_AFTER_FAILURES:
                    # A server that will not go on from this version (it answers 200 and closes, or breaks
                    # the stream, instead of 410) is asked for a fresh list: a list is always a safe start.
                    self.version = ""
                log.warning("watch of %s failed (%s); again in a moment", self.source.kind, exc)
                self._stop.wait(min(30.0, 0.25 * 2 ** min(failures, 7)))
            except Exception:  # a bug must not end the thread silently: the engine lists meanwhile
                self.live = False
                log.exception("watch of %s failed", self.source.kind)
                self._stop.wait(5.0)
        self.live = False

    def close(self) -> None:
        stream = self._stream
        if stream is not None:
            stream.close()

    def _list(self) -> None:
        s = self.source
        items, version = self.client.list_at(s.kind, None, s.label_selector, s.field_selector)
        fresh = {obj["metadata"]["uid"]: _slim(obj) for obj in items}
        by_job: dict[str, dict[str, Obj]] = {}
        for uid, obj in fresh.items():
            if job_uid := job_of(obj):
                by_job.setdefault(job_uid, {})[uid] = obj
        with self._lock:
            old, self._objects, self._by_job, self.version = self._objects, fresh, by_job, version
        self.lists += 1
        for uid, obj in fresh.items():
            before = old.pop(uid, None)
            if before is None or _version(before) != _version(obj):
                self._changed(obj)
        for gone in old.values():
            self._changed(gone)

    def _follow(self) -> int:
        """Apply one watch's events until it ends; returns how many it had."""
        s = self.source
        self._stream = self.client.watch(s.kind, self.version, s.label_selector, s.field_selector, WATCH_SECONDS)
        self.live = True
        count = 0
        try:
            for event in self._stream:
                count += 1
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise kube.Gone(410, str(obj.get("reason") or "Gone"), str(obj.get("message") or ""))
                    raise TransientEngineError(f"watch of {s.kind}: {obj.get('message') or obj}")
                version = _version(obj)
                if kind == "BOOKMARK":
                    self.version = version or self.version
                    continue
                uid = (obj.get("metadata") or {}).get("uid")
                if not uid:
                    continue
                with self._lock:
                    if kind == "DELETED":
                        self._drop(uid)
                    else:
                        self._put(uid, _slim(obj))
                    self.version = version or self.version
                self._changed(obj)
                if self._stop.is_set():
                    break
        finally:
            self._stream = None
        return count


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


_serials = itertools.count(1)


class Mirror:
    """A datacenter's sources, one informer thread each; `items(kind)` once `ready()`; `versions(job uids)`: which
    change of each job's objects it saw last, so a reconcile can tell a job nothing happened to (follow/settled.py)."""

    def __init__(
        self, client: kube.Kube, datacenter_selector: str, on_job: Callable[[str], None], kueue: bool = False
    ) -> None:
        self.client, self.selector, self.kueue = client, datacenter_selector, kueue
        self.used_at = time.monotonic()
        self._stop = threading.Event()
        self._on_job = on_job
        self._counts_lock = threading.Lock()
        # Job uid -> the number of the last change seen of its objects, numbered over all the mirror's changes:
        # an entry forgotten and made again can never come back with the number it had.
        self._serial, self._seq, self._last = next(_serials), 0, dict[str, int]()
        self.informers = {
            s.kind: Informer(client, s, self._changed, self._stop) for s in sources(datacenter_selector, kueue)
        }

    def start(self, name: str) -> None:
        for kind, informer in self.informers.items():
            threading.Thread(target=informer.run, name=f"watch-{name}-{kind}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        for informer in self.informers.values():
            informer.close()

    def ready(self) -> bool:
        return all(informer.live for informer in self.informers.values())

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline or self._stop.is_set():
                return False
            time.sleep(0.02)
        return True

    def items(self, kind: str, job_uids: Iterable[str] | None = None) -> list[Obj]:
        return self.informers[kind].items(job_uids)

    def versions(self, job_uids: Iterable[str], complete: bool = False) -> dict[str, tuple[int, int]]:
        """Each job's version: (this mirror's serial, the number of its last change; 0 none seen). Read it before
        reading the objects: a change landing between the two then shows as a new version at the next look.
        `complete`: these are all the jobs that matter (a full cycle's started jobs), the others are forgotten,
        so the mirror remembers no more jobs than run (the Workloads of other datacenters' JobSets included)."""
        with self._counts_lock:
            found = {uid: (self._serial, self._last.get(uid, 0)) for uid in job_uids}
            if complete:
                self._last = {uid: last for uid, (_, last) in found.items() if last}
            return found

    def _changed(self, obj: Obj) -> None:
        job_uid = job_of(obj)
        if job_uid:
            with self._counts_lock:  # informers of several kinds count at once
                if len(self._last) >= MAX_COUNTED_JOBS:  # only without full cycles: never in the control worker
                    self._serial, self._last = next(_serials), {}
                self._seq += 1
                self._last[job_uid] = self._seq
            self._on_job(job_uid)


class Changes:
    """Job uids whose objects changed, handed to the handler in batches by a thread of its own (the
    informers never wait for a reconcile)."""

    def __init__(self, handler: Callable[[set[str]], None]) -> None:
        self.handler = handler
        self.stop = threading.Event()  # its own: a later enable() never revives this one
        self._pending: set[str] = set()
        self._ready = threading.Condition()

    def add(self, job_uid: str) -> None:
        with self._ready:
            self._pending.add(job_uid)
            self._ready.notify()

    def run(self) -> None:
        while not self.stop.is_set():
            with self._ready:
                self._ready.wait_for(lambda: self._pending or self.stop.is_set(), timeout=1.0)
            if not self._pending:
                continue
            time.sleep(COALESCE_SECONDS)
            with self._ready:
                batch, self._pending = self._pending, set()
            try:
                self.handler(batch)
            except Exception:
                log.exception("handling changes of %d jobs failed", len(batch))


_lock = threading.Lock()
_mirrors: dict[int, Mirror] = {}  # datacenter pk -> its mirror
_enabled = False
_changes: Changes | None = None


def enable(handler: Callable[[set[str]], None] | None = None) -> None:
    """Let this process mirror the datacenters it polls; `handler(job uids)` hears of their changes."""
    global _enabled, _changes
    with _lock:
        _enabled = True
        if handler is not None and _changes is None:
            _changes = Changes(handler)
            threading.Thread(target=_changes.run, name="watch-changes", daemon=True).start()


def disable() -> None:
    """Stop every mirror of this process (worker shutdown; tests)."""
    global _enabled, _changes
    with _lock:
        _enabled = False
        if _changes is not None:
            _changes.stop.set()
        _changes = None
        for mirror in _mirrors.values():
            mirror.stop()
        _mirrors.clear()


def _job_changed(job_uid: str) -> None:
    changes = _changes
    if changes is not None:
        changes.add(job_uid)


def mirror_for(datacenter_pk: int, client: kube.Kube, datacenter_selector: str, kueue: bool = False) -> Mirror | None:
    """The datacenter's mirror when this process mirrors and it is ready; else None (list instead).

    The first call starts it; a client made for new credentials (or a renamed datacenter, or a changed
    admission: `kueue` follows JobSets and Workloads too) replaces it."""
    if not _enabled:
        return None
    now = time.monotonic()
    with _lock:
        for pk in [pk for pk, m in _mirrors.items() if now - m.used_at > IDLE_SECONDS]:
            _mirrors.pop(pk).stop()
        mirror = _mirrors.get(datacenter_pk)
        if mirror is not None and (
            mirror.client.api is not client.api or mirror.selector != datacenter_selector or mirror.kueue != kueue
        ):
            _mirrors.pop(datacenter_pk).stop()
            mirror = None
        if mirror is None:
            while len(_mirrors) >= MAX_MIRRORS:
                oldest = min(_mirrors, key=lambda pk: _mirrors[pk].used_at)
                _mirrors.pop(oldest).stop()
            mirror = Mirror(client.counted_apart(WATCH_CALLS), datacenter_selector, _job_changed, kueue)
            mirror.start(str(datacenter_pk))
            _mirrors[datacenter_pk] = mirror
        mirror.used_at = now
    return mirror if mirror.ready() else None


def running() -> Iterable[Mirror]:
    with _lock:
        return list(_mirrors.values())
