"""jobs.files.layout on the contract's layout: the portal reads a worker's files where the job writes them."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import User
from paddlecloud import metrics

from datacenters.models import Datacenter
from jobs.files import layout
from tests.pages.test_pages import make_job


def test_the_portal_reads_where_the_job_writes(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, name="fit", uid="fit-ab12c")
    output = layout.output_dir(local_dc, "alice", "fit", "fit-ab12c")
    env = {"PADDLECLOUD_OUTPUT_DIR": str(output), "PADDLECLOUD_ROLE": "pserver", "PADDLECLOUD_INDEX": "1"}
    written = metrics.default_path(env)
    read = Path(local_dc.storage_root, "home", "alice", *layout.worker_parts(job, "pserver-1", "metrics.jsonl"))
    assert written == read == output / "pserver_1" / "metrics.jsonl"
    assert layout.output_logical(job) == "/pfs/local/home/alice/jobs/fit/output/fit-ab12c"
    assert layout.output_logical(job) == layout.logical(local_dc, output)  # the text join is the paths' rule
    assert layout.default_package(local_dc, alice, "fit") == "/pfs/local/home/alice/jobs/fit"
