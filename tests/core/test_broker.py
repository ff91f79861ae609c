"""The embedded broker (core/broker.py): whole messages, a consumer woken at once, nothing lost to a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Consumer, Message, Queue

ROOT = Path(__file__).resolve().parents[2]
# Far longer than any wait below: a test passes only if the consumer is woken, not by its poll.
SLOW_POLL = 120.0


@pytest.fixture
def options(tmp_path: Path) -> dict[str, object]:
    queue_dir = tmp_path / "queue"
    queue_dir.mkdir()
    return {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir),
            "control_folder": str(tmp_path / "control"), "polling_interval": SLOW_POLL}  # fmt: skip


@pytest.fixture
def q() -> str:
    # kombu's filesystem transport keeps the exchanges it declared in one table per process: a queue
    # of the same name declared again under another test's folders would route nowhere.
    return f"q{uuid.uuid4().hex[:8]}"


@pytest.fixture
def connection(options: dict[str, object]) -> Iterator[Connection]:
    with Connection("pcfs://", transport_options=options) as conn:
        yield conn


def messages(options: dict[str, object]) -> list[str]:
    return sorted(p.name for p in Path(str(options["data_folder_in"])).iterdir() if p.name.endswith(".msg"))


def claimed(options: dict[str, object]) -> list[str]:
    claims = Path(str(options["data_folder_in"])) / ".claims"
    return sorted(p.name for p in claims.glob("*/*.msg")) if claims.exists() else []


def test_messages_go_through_the_embedded_broker_and_no_partial_file_is_visible(
    connection: Connection, options: dict[str, object], q: str
) -> None:
    queue = connection.SimpleQueue(q)
    queue.put({"n": 1})
    files = [p for p in Path(str(options["data_folder_in"])).iterdir() if not p.name.startswith(".")]
    # Only finished messages carry the ".msg" name a reader looks for; nothing temporary is left.
    assert [f.name.endswith(f".{q}.msg") for f in files] == [True]
    assert json.loads(files[0].read_text())
    message = queue.get(timeout=2)
    assert message.payload == {"n": 1}
    message.ack()
    queue.close()
    assert messages(options) == [] and claimed(options) == []


def test_a_taken_message_is_claimed_until_acked_and_a_rejected_one_goes_back(
    connection: Connection, options: dict[str, object], q: str
) -> None:
    queue = connection.SimpleQueue(q)
    queue.put({"n": 1})
    first = queue.get(timeout=2)
    assert messages(options) == [] and len(claimed(options)) == 1
    first.reject(requeue=True)
    assert len(messages(options)) == 1 and claimed(options) == []
    again = queue.get(timeout=2)
    assert again.payload == {"n": 1}
    again.ack()
    assert messages(options) == [] and claimed(options) == []
    queue.close()


def test_closing_a_consumer_puts_back_what_it_took_and_did_not_ack(options: dict[str, object], q: str) -> None:
    with Connection("pcfs://", transport_options=options) as conn:
        queue = conn.SimpleQueue(q)
        queue.put({"n": 1})
        assert queue.get(timeout=2).payload == {"n": 1}  # never acked
        queue.close()
    assert len(messages(options)) == 1 and claimed(options) == []


TAKER = """
import json, sys, time
from kombu import Connection
from core.broker import Transport
with Connection(transport=Transport, transport_options=json.loads(sys.argv[1])) as conn:
    queue = conn.SimpleQueue(sys.argv[2])
    print(queue.get(timeout=30).payload["n"], flush=True)  # taken, never acked: a task still running
    time.sleep(600)
"""


def test_a_message_taken_by_a_consumer_killed_with_sigkill_is_delivered_again(
    connection: Connection, options: dict[str, object], q: str
) -> None:
    """acks_late's promise: a worker killed mid-task leaves its message for the next one (kombu's deleted it)."""
    queue = connection.SimpleQueue(q)
    queue.put({"n": 7})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    taker = subprocess.Popen([sys.executable, "-c", TAKER, json.dumps(options), q], stdout=subprocess.PIPE, env=env)
    try:
        assert taker.stdout is not None
        assert taker.stdout.readline().strip() == b"7"
    finally:
        taker.send_signal(signal.SIGKILL)
        taker.wait()
    message = queue.get(timeout=30)  # this consumer's first look puts back the dead one's claims
    assert message.payload == {"n": 7}
    message.ack()
    assert messages(options) == [] and claimed(options) == []
    queue.close()


class Background:
    """A consumer of queue `q` with `prefetch` slots, draining events in a thread until it has `count` messages."""

    def __init__(self, connection: Connection, q: str, prefetch: int, count: int) -> None:
        self.received: list[Message] = []
        self.arrived = threading.Event()
        consumer = Consumer(connection, [Queue(q)], callbacks=[self.on_message], accept=["json"])
        consumer.qos(prefetch_count=prefetch)
        consumer.consume()
        self.thread = threading.Thread(target=self.drain, args=(connection, count), daemon=True)
        self.thread.start()

    def on_message(self, body: Any, message: Message) -> None:
        self.received.append(message)
        self.arrived.set()

    def drain(self, connection: Connection, count: int) -> None:
        while len(self.received) < count:
            connection.drain_events(timeout=SLOW_POLL)

    def payloads(self) -> list[Any]:
        return [m.payload for m in self.received]


def test_a_waiting_consumer_wakes_when_another_process_sends(
    connection: Connection, options: dict[str, object], q: str
) -> None:
    background = Background(connection, q, prefetch=2, count=1)
    time.sleep(1)  # it has found the queue empty and waits (kombu's slept its whole polling interval, SLOW_POLL)
    with Connection("pcfs://", transport_options=options) as sender:
        sender.SimpleQueue(q).put({"n": 1})
    background.thread.join(SLOW_POLL / 4)
    assert background.payloads() == [{"n": 1}], "the consumer was not woken by the new message"
    background.received[0].ack()


def test_a_consumer_with_every_slot_busy_takes_the_next_message_as_soon_as_one_is_acked(
    connection: Connection, q: str
) -> None:
    sender = connection.SimpleQueue(q)
    sender.put({"n": 1})
    sender.put({"n": 2})
    background = Background(connection, q, prefetch=1, count=2)
    assert background.arrived.wait(SLOW_POLL / 4)
    assert background.payloads() == [{"n": 1}]
    # Its one slot is busy; kombu slept the polling interval before it looked again after the ack.
    background.received[0].ack()
    background.thread.join(SLOW_POLL / 4)
    assert background.payloads() == [{"n": 1}, {"n": 2}], "the freed slot did not wake the consumer"
    background.received[1].ack()


STOPPING = """
import json, signal, sys, time
from celery.signals import worker_shutting_down
from kombu import Connection, Consumer, Queue
from core.broker import Transport
# What Celery's worker does on SIGTERM: its handler sends worker_shutting_down, then the loop drains once more.
signal.signal(signal.SIGTERM, lambda *_: worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0))
taken = []
with Connection(transport=Transport, transport_options=json.loads(sys.argv[1])) as conn:
    consumer = Consumer(conn, [Queue(sys.argv[2])], callbacks=[lambda body, message: taken.append(body)])
    consumer.consume()
    print("waiting", flush=True)
    for _ in range(2):
        started = time.monotonic()
        try:
            conn.drain_events(timeout=60)
        except TimeoutError:
            pass
        print(f"drained in {time.monotonic() - started:.1f}s, took {len(taken)}", flush=True)
        sys.stdin.readline()  # the test has queued a message
"""


def test_a_stopping_worker_stops_waiting_for_messages_at_once_and_takes_none(
    options: dict[str, object], q: str
) -> None:
    """Celery's loop drained up to 2 s, and once more after a warm shutdown was asked for: each test's worker took
    ~4 s to stop. The shutdown signal wakes the waiting consumer; a drain after it returns without taking."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    consumer = subprocess.Popen(
        [sys.executable, "-c", STOPPING, json.dumps(options), q],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert consumer.stdin is not None and consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # in select(), with 60 s to go
        consumer.send_signal(signal.SIGTERM)
        first = consumer.stdout.readline().strip()
        with Connection("pcfs://", transport_options=options) as sender:
            sender.SimpleQueue(q).put({"n": 1})  # sent while the worker stops: left for the next one
        consumer.stdin.write("queued\n")
        consumer.stdin.flush()
        second = consumer.stdout.readline().strip()
        consumer.stdin.write("done\n")
        consumer.stdin.close()
        assert consumer.wait(30) == 0
    finally:
        consumer.kill()
    waited = float(first.split()[2].rstrip("s,"))
    assert 0.4 <= waited < 30 and first.endswith("took 0"), first  # woken by the signal, not the 60 s timeout
    assert second.startswith("drained in 0.0s") and second.endswith("took 0"), second
    assert len(messages(options)) == 1 and claimed(options) == []
