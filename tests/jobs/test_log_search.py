"""Server-side search of a worker's whole log (GET /api/v1/jobs/<name>/logs/search), and reading from a match."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow import log_search
from jobs.models import Job
from tests.pages.test_pages import make_job

pytestmark = pytest.mark.django_db
SEARCH = "/api/v1/jobs/fit/logs/search"


def log_file(dc: Datacenter, job: Job) -> Path:
    folder = Path(dc.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid, "trainer_0")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "log.txt"


def test_a_line_in_the_first_mib_of_a_10_mib_log_is_found_and_read_from(
    alice_api: APIClient, local_dc: Datacenter, alice: User
) -> None:
    job = make_job(local_dc, alice)
    filler = b"".join(b"step %07d loss 0.5\n" % i for i in range(20_000))  # ~0.4 MiB
    with log_file(local_dc, job).open("wb") as out:
        out.write(filler)
        at = out.tell()
        out.write(b"RuntimeError: the NEEDLE went missing (twice: needle)\n")
        out.write(filler * 24)  # ~10 MiB in all; the viewer's tail never holds the match
    answer = alice_api.get(SEARCH, {"q": "needle"})
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["matches"] == [{"offset": at, "line": "RuntimeError: the NEEDLE went missing (twice: needle)"}]
    assert body["next"] is None and body["size"] > 10 << 20
    # The offset is a cursor of the logs API: the viewer opens the log at the match.
    read = alice_api.get("/api/v1/jobs/fit/logs", {"cursor": str(at)}).json()
    assert read["text"].startswith("RuntimeError: the NEEDLE went missing")


def test_many_matches_come_a_hundred_at_a_time_and_long_lines_around_the_match(
    alice_api: APIClient, bob_api: APIClient, local_dc: Datacenter, alice: User
) -> None:
    job = make_job(local_dc, alice)
    lines = [f"epoch {i} hit\n" for i in range(250)] + ["x" * 5000 + " far hit " + "y" * 5000 + "\n"]
    log_file(local_dc, job).write_text("".join(lines))
    seen: list[dict[str, object]] = []
    start: int | None = 0
    rounds = 0
    while start is not None:
        body = alice_api.get(SEARCH, {"q": "HIT", "from": str(start)}).json()
        seen += body["matches"]
        start, rounds = body["next"], rounds + 1
    assert rounds == 3 and len(seen) == 251
    assert [m["line"] for m in seen[:3]] == ["epoch 0 hit", "epoch 1 hit", "epoch 2 hit"]
    assert len({m["offset"] for m in seen}) == 251  # each line once, none twice across the pages
    far = str(seen[-1]["line"])
    assert far.startswith("…") and far.endswith("…") and " far hit " in far and len(far) <= log_search.SHOWN + 2
    assert bob_api.get(SEARCH, {"q": "hit"}).status_code == 404  # not bob's job


def test_no_log_yet_is_a_404_saying_so(alice_api: APIClient, local_dc: Datacenter, alice: User) -> None:
    make_job(local_dc, alice)
    answer = alice_api.get(SEARCH, {"q": "x"})
    assert answer.status_code == 404 and "no log" in answer.json()["detail"]
