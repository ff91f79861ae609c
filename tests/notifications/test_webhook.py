"""A webhook receiver that trickles its answer is cut at the delivery's deadline, and never delays job work."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from core import lanes
from datacenters.models import Datacenter
from jobs.models import STARTED_STATES, Job, JobState
from jobs.states import transition
from notifications import webhook
from notifications.models import Delivery, DeliveryState
from tests.jobs.conftest import put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

FAKE_PACKAGE = Path(__file__).resolve().parents[1] / "jobs" / "fake_package"


class Trickler:
    """A receiver on 127.0.0.1 that reads the request, then answers one byte a second, for ever.

    With `tls`, the bytes are the start of a TLS handshake record: the client is still shaking hands.
    """

    HTTP = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000
    TLS = b"\x16\x03\x03\x40\x00\x02" + b"\x00" * 100_000  # a ServerHello record of 16 KiB, slowly

    def __init__(self, tls: bool = False) -> None:
        self.accepted = 0
        self.answer = self.TLS if tls else self.HTTP
        self.closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(10)
            connection.recv(65536)  # the request's head (or the ClientHello)
            for byte in self.answer:
                if self.closed.wait(1.0):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the client hung up: cut at its deadline

    def close(self) -> None:
        self.closed.set()
        self.listener.close()


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    receiver = Trickler()
    yield receiver
    receiver.close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https-handshake"])
def test_a_trickling_receiver_is_cut_at_the_deadline(tls: bool) -> None:
    receiver = Trickler(tls=tls)
    try:
        started = time.monotonic()
        with pytest.raises(webhook.WebhookTransient, match="no complete answer within 2 s"):
            webhook.post_json(receiver.url, {"job": "fit"}, timeout=2, allow_private=True)
        # Each byte comes within any per-read timeout; only a deadline for the whole POST ends it.
        assert time.monotonic() - started < 2 + 3
        assert receiver.accepted == 1
    finally:
        receiver.close()


def test_a_receiver_that_answers_in_time_is_not_cut() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def answer() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
        assert webhook.post_json(url, {"job": "fit"}, timeout=5, allow_private=True) == 204


# The operator's settings, for both workers: loopback receivers allowed, and a long deadline, so the
# trickling deliveries are still held while bob's job starts.
WORKER_ENV = {"PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE": "true", "PADDLECLOUD_WEBHOOK_TIMEOUT": "60"}


@pytest.fixture
def job_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """The worker that starts and follows jobs, with two slots as `make run` gives it; no notifications."""
    process = start_worker(
        tmp_path, (lanes.JOBS, lanes.CONTROL, lanes.SIDE), beat=True, concurrency=2, extra_env=WORKER_ENV
    )
    yield process
    process.stop()


@pytest.fixture
def notify_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, (lanes.NOTIFY,), concurrency=2, extra_env=WORKER_ENV)
    yield process
    process.stop()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_trickling_webhooks_of_alice_do_not_delay_bobs_job(
    trickler: Trickler, local_dc: Datacenter, alice: User, bob: User, bob_api: APIClient,
    job_worker: WorkerProcess, notify_worker: WorkerProcess,
) -> None:  # fmt: skip
    put_package(local_dc, bob, "fake", FAKE_PACKAGE)
    # Three of alice's jobs end, each with a webhook that trickles: more deliveries than any worker has slots.
    for index in range(3):
        job = Job.objects.create(owner=alice, datacenter=local_dc, name=f"hook{index}", uid=f"hook{index}-ab12c",
                                 spec={"parallelism": 1, "pservers": 0, "notify": {"webhook": trickler.url}},
                                 state=JobState.RUNNING)  # fmt: skip
        assert transition(job.pk, JobState.SUCCEEDED, reason="")
    wait_for(lambda: trickler.accepted >= 2, "a worker to take the deliveries", 60, watch=notify_worker)

    submitted = time.monotonic()
    spec = {"jobname": "fake", "entry": "python train.py", "parallelism": 1, "pservers": 0}
    assert bob_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(owner=bob, name="fake", state__in=STARTED_STATES).exists(),
             "bob's job to start", 45, watch=job_worker)  # fmt: skip
    started_after = time.monotonic() - submitted
    # The deliveries still hang on the receiver: bob's job did not wait for them.
    assert not Delivery.objects.filter(state=DeliveryState.SENT).exists()
    assert trickler.accepted >= 2 and started_after < 45
    print(f"bob's job started {started_after:.1f} s after submission")  # shown with -s
