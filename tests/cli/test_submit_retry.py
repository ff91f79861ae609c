"""`paddlectl submit` retries safely: the answer to the submit is lost, the retry (same idempotency key) gets
the job the first attempt created, never a name conflict or a second job."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.models import Job
from tests.cli.conftest import Portal, config_text, write_config
from tests.cli.proxy import Proxy
from tests.jobs.conftest import put_package

SUBMIT = b"POST /api/v1/jobs HTTP/"  # the submit itself (its dry run carries ?dry_run=1)


class LosesOneAnswer(Proxy):
    """Passes everything, except that the portal's answer to the first submit never reaches the client."""

    def __init__(self, target_url: str) -> None:
        super().__init__(target_url)
        self.armed = True
        self.doomed: set[int] = set()  # client sockets whose next answer is dropped

    def _pipe(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    if from_client:
                        self.sent += data
                        if self.armed and SUBMIT in data:
                            self.armed = False
                            self.doomed.add(id(source))
                    elif id(sink) in self.doomed:
                        break  # the portal answered (the job exists); the client hears only a closed connection
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def lossy(portal: Portal) -> Iterator[LosesOneAnswer]:
    front = LosesOneAnswer(portal.url)
    front.start()
    write_config(portal.config, config_text(front.url))
    yield front
    front.stop()


def test_a_submit_whose_answer_is_lost_is_retried_and_gets_the_job_it_created(
    portal: Portal, lossy: LosesOneAnswer
) -> None:
    put_package(portal.datacenter, portal.user, "fake", Path(__file__).parents[1] / "jobs" / "fake_package")
    result = portal.run(
        "submit", "-jobname", "fake", "-entry", "python train.py", "-parallelism", "1", "-o", "json",
        f"{portal.remote_home}/jobs/fake",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not lossy.armed and lossy.count(SUBMIT) == 2  # the first answer was lost; the retry was answered
    job = Job.objects.get()  # one job
    assert job.uid in result.stdout
    assert job.spec["idempotency_key"]
