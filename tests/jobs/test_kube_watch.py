"""The Kubernetes mirror's informer (jobs/engines/kubernetes/watch.py) as plain logic: what it keeps from a
list and a stream of watch events, when it lists again, and when it stops vouching for its copy. A scripted
client stands in for the API server; the real one is in tests/k8s/test_watch.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from jobs.engines.base import TransientEngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import watch


def pod(uid: str, version: str, job: str = "j1") -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "resourceVersion": version,
            "labels": {"paddlecloud.org/job": job},
            "managedFields": [{"manager": "kubelet"}],
        }
    }


class Stream:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.events

    def close(self) -> None:
        pass


class Scripted:
    """Answers list_at and watch from scripts; when the watch script is spent it stops the informer."""

    def __init__(self, lists: list[tuple[list[dict[str, Any]], str]], watches: list[Any], stop: threading.Event):
        self.lists, self.watches, self.stop = lists, watches, stop
        self.watched_from: list[str] = []
        self.live_while_watching: list[bool] = []
        self.informer: watch.Informer | None = None

    def list_at(self, kind: str, namespace: str | None, labels: str, fields: str) -> tuple[list[Any], str]:
        return self.lists.pop(0)

    def watch(self, kind: str, version: str, labels: str, fields: str, seconds: int) -> Stream:
        self.watched_from.append(version)
        if not self.watches:
            self.stop.set()
            return Stream([])
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        return Stream(step)


def run(lists: list[Any], watches: list[Any]) -> tuple[watch.Informer, Scripted, list[str]]:
    stop = threading.Event()
    client = Scripted(lists, watches, stop)
    changed: list[str] = []
    informer = watch.Informer(client, watch.Source("Pod"), lambda obj: changed.append(obj["metadata"]["uid"]), stop)  # type: ignore[arg-type]
    informer.run()
    return informer, client, changed


def test_a_list_then_events_keep_the_objects_and_the_version() -> None:
    events = [
        {"type": "ADDED", "object": pod("b", "11")},
        {"type": "MODIFIED", "object": pod("a", "12")},
        {"type": "DELETED", "object": pod("b", "13")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
    ]
    informer, client, changed = run([([pod("a", "10")], "10")], [events])
    assert [p["metadata"]["uid"] for p in informer.items()] == ["a"]
    assert informer.items()[0]["metadata"]["resourceVersion"] == "12"
    assert "managedFields" not in informer.items()[0]["metadata"]  # not kept: nothing reads them
    assert informer.version == "20" and informer.lists == 1
    assert client.watched_from == ["10", "20"]  # the next watch goes on from the bookmark, no list
    assert changed == ["a", "b", "a", "b"]


def test_a_410_lists_again_and_says_what_vanished_meanwhile() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    informer, client, changed = run([([pod("a", "10"), pod("b", "10")], "10"), ([pod("a", "30")], "30")], [[gone]])
    assert informer.lists == 2 and informer.version == "30"
    assert [p["metadata"]["uid"] for p in informer.items()] == ["a"]
    assert changed == ["a", "b", "a", "b"]  # first list; then a changed and b vanished
    assert client.watched_from == ["10", "30"]


def test_a_broken_watch_is_not_trusted_until_one_opens_again() -> None:
    stop = threading.Event()
    client = Scripted([([pod("a", "10")], "10")], [TransientEngineError("connection reset")], stop)
    informer = watch.Informer(client, watch.Source("Pod"), lambda obj: None, stop)  # type: ignore[arg-type]
    seen: list[bool] = []
    real_watch = client.watch

    def watching(*args: Any) -> Stream:
        seen.append(informer.live)
        return real_watch(*args)

    client.watch = watching  # type: ignore[method-assign,assignment]
    informer.run()
    # live before the first watch: no; after it broke: no; the run ended (stop) and says so
    assert seen == [False, False] and not informer.live
    assert client.watched_from == ["10", "10"]  # the second watch goes on from where the first was: no list


def test_a_gone_answer_to_the_watch_request_itself_lists_again() -> None:
    informer, client, _ = run(
        [([pod("a", "10")], "10"), ([pod("a", "40")], "40")], [kube.Gone(410, "Expired", "too old")]
    )
    assert informer.lists == 2 and client.watched_from == ["10", "40"]


def test_watches_that_end_at_once_with_nothing_three_times_list_again() -> None:
    # What kube-apiserver 1.36 does with a version it cannot go on from: 200, then the stream ends.
    informer, client, _ = run([([pod("a", "1")], "1"), ([pod("a", "50")], "50")], [[], [], []])
    assert informer.lists == 2
    assert client.watched_from == ["1", "1", "1", "50"]


def test_versions_change_with_each_change_of_a_jobs_objects_and_a_full_cycle_forgets_the_others() -> None:
    mirror = watch.Mirror(Scripted([], [], threading.Event()), "sel", lambda uid: None)  # type: ignore[arg-type]
    first = mirror.versions(["j1", "j2"])
    assert first["j1"] == first["j2"] and first["j1"][1] == 0  # nothing seen of either yet
    mirror._changed(pod("p1", "1", job="j1"))
    mirror._changed(pod("p2", "2", job="j2"))
    seen = mirror.versions(["j1", "j2"])
    assert seen["j1"] != first["j1"] and seen["j2"] != first["j2"] and seen["j1"] != seen["j2"]
    assert mirror.versions(["j1"]) == {"j1": seen["j1"]}  # unchanged while nothing happens
    mirror._changed(pod("p1", "3", job="j1"))
    assert mirror.versions(["j1", "j2"]) == {"j1": (seen["j1"][0], seen["j2"][1] + 1), "j2": seen["j2"]}
    # A full cycle's jobs are all that matter: j2 (ended) is forgotten, and a change of it after that is
    # numbered past every change before, so it never matches a version it had.
    latest = mirror.versions(["j1"], complete=True)
    assert mirror.versions(["j2"])["j2"][1] == 0
    mirror._changed(pod("p2", "4", job="j2"))
    assert mirror.versions(["j2"])["j2"][1] > latest["j1"][1] > seen["j2"][1]
    assert mirror.versions(["j1"]) == latest
