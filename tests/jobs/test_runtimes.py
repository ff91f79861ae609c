"""Runtimes on the local engine: `-image` names one or is refused; a job's requirements are a per-user layer."""

from __future__ import annotations

import re
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from paddlecloud.contract import venvcache
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Engine, rules_for
from jobs.engines.local import processes, runtimes
from jobs.models import Job, Runtime
from storage import paths
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

BODY = {"jobname": "fake", "entry": "python train.py"}


@pytest.mark.django_db
def test_an_unknown_image_is_refused_with_the_runtimes_one_may_choose(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    Runtime.objects.create(datacenter=local_dc, name="nlp", requirements="paddlepaddle==3.0.0\nprotobuf<7\njieba\n")
    response = alice_api.post("/api/v1/jobs", {**BODY, "image": "paddlepaddle/paddle:3.0.0"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "image",
            "code": "invalid",
            "message": "'paddlepaddle/paddle:3.0.0' is not a runtime of datacenter local; choose one of: default, nlp",
        }
    ]
    assert not Job.objects.exists()
    for image in ("nlp", "default", ""):
        body = {**BODY, "jobname": f"j{image}", "image": image, "package": "/pfs/local/home/alice/jobs/fake"}
        response = alice_api.post("/api/v1/jobs", body, format="json")
        assert response.status_code == 201, response.json()


@pytest.mark.django_db
def test_image_is_left_alone_on_kubernetes(local_dc: Datacenter) -> None:
    local_dc.engine = Engine.KUBERNETES
    rules_for(local_dc.engine).check_spec(
        local_dc, {"image": "registry.example.com/me/paddle:1", "parallelism": 1, "gpu": 0}
    )


@pytest.mark.django_db
def test_default_is_the_builtin_runtimes_name(local_dc: Datacenter) -> None:
    with pytest.raises(ValidationError) as raised:
        Runtime(datacenter=local_dc, name="default", requirements="x\n").full_clean()
    assert "built-in" in str(raised.value)


@pytest.mark.paddle
@pytest.mark.django_db
def test_layers_are_per_user_and_writable_only_until_installed(
    alice: User, bob: User, local_dc: Datacenter, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="a", uid="a-1", spec={"image": ""})
    bare = runtimes.runtime_for(job, package)
    base = Path(bare.python).parent.parent
    assert bare.building is None and str(base) in bare.readonly
    assert (base / venvcache.COMPLETE_MARKER).is_file()
    # A token in a comment: a layer no earlier run (with the same user ids) has built in the host's cache.
    (package / "requirements.txt").write_text(f"# {uuid.uuid4()}\npaddlepaddle==3.0.0\nprotobuf<7\n")
    alices = runtimes.runtime_for(job, package)
    bobs = runtimes.runtime_for(Job(owner=bob, datacenter=local_dc, spec={}), package)
    assert alices.building and bobs.building and alices.building != bobs.building
    # Only the layer being installed: its folder and lock made by the worker, in the user's cache.
    cache = Path(alices.env["PADDLECLOUD_VENV_CACHE"])
    assert Path(alices.building).parent == cache == runtimes.layer_cache_of(alice.pk)
    assert Path(alices.building).is_dir() and Path(f"{alices.building}.lock").is_file()
    assert not any(alices.building.startswith(p) or p.startswith(alices.building) for p in alices.readonly)
    # Whatever a job of an older portal left at those names (the cache was all its own), the worker makes them anew.
    shutil.rmtree(alices.building)
    Path(alices.building).symlink_to("/etc")
    Path(f"{alices.building}.lock").unlink()
    Path(f"{alices.building}.lock").mkdir()
    again = runtimes.runtime_for(job, package)
    assert again.building == alices.building and not Path(alices.building).is_symlink()
    assert Path(alices.building).is_dir() and Path(f"{alices.building}.lock").is_file() and Path("/etc/passwd").exists()


def put(datacenter: Datacenter, user: User, name: str, requirements: str | None) -> None:
    package = Path(datacenter.storage_root) / "home" / user.username / "jobs" / name
    package.mkdir(parents=True)
    (package / "train.py").write_text(
        "import paddle, paddlecloud\nprint('paddle', paddle.__version__, flush=True)\n"
        "try:\n    import tabulate\n    print('tabulate from', tabulate.__file__, flush=True)\n"
        "except ImportError:\n    print('no tabulate', flush=True)\n"
    )
    if requirements is not None:
        (package / "requirements.txt").write_text(requirements)


@pytest.mark.paddle
@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_no_requirements_runs_on_the_base_and_one_small_package_is_a_layer_not_a_new_paddle(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put(local_dc, alice, "bare", None)
    assert alice_api.post("/api/v1/jobs", {**BODY, "jobname": "bare"}, format="json").status_code == 201
    job = finished("bare", worker, timeout=600)
    assert job.state == "succeeded", job.message
    text = alice_api.get("/api/v1/jobs/bare/logs?worker=trainer-0").json()["text"]
    assert "paddle 3.0.0" in text and "no tabulate" in text and "installing" not in text

    put(local_dc, alice, "layer", f"# {uuid.uuid4()}\npaddlepaddle==3.0.0\nprotobuf<7\ntabulate\n")
    assert alice_api.post("/api/v1/jobs", {**BODY, "jobname": "layer"}, format="json").status_code == 201
    job = finished("layer", worker, timeout=300)
    assert job.state == "succeeded", job.message
    text = alice_api.get("/api/v1/jobs/layer/logs?worker=trainer-0").json()["text"]
    assert "Requirement already satisfied: paddlepaddle==3.0.0" in text
    assert "Installing collected packages: tabulate" in text and "Downloading paddlepaddle" not in text
    assert f"/layers/{settings.PADDLECLOUD_SITE}/user-{alice.pk}/" in text and "paddle 3.0.0" in text


# Writes tried by a layer's build step (a source distribution's setup.py, which pip runs as it builds it in the
# step's private /tmp) and by the job's own code: its user's home, beside its layer in the user's cache, another
# layer, its own layer.
WRITES = r"""
import errno, os
def attempts(home, cache, layer):
    out = []
    for what, path in [("home", os.path.join(home, "planted.bin")), ("beside", os.path.join(cache, "hidden.bin")),
                       ("other layer", os.path.join(cache, "other", "x")),
                       ("own layer", os.path.join(layer, "mine.bin"))]:
        try:
            with open(path, "wb") as f:
                f.write(b"x" * 4096)
            out.append(what + " written")
        except OSError as exc:
            out.append(what + " refused " + errno.errorcode[exc.errno])
    return out
"""


def sdist(folder: Path, name: str, setup_code: str) -> str:
    """A source distribution `<name>-1.0.tar.gz` in `folder` whose setup.py runs `setup_code` first."""
    source = folder / f"{name}-src"
    (source / f"{name}-1.0").mkdir(parents=True)
    setup = f"{setup_code}\nfrom setuptools import setup\nsetup(name={name!r}, version='1.0', py_modules=[])\n"
    (source / f"{name}-1.0" / "setup.py").write_text(setup)
    (source / f"{name}-1.0" / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    with tarfile.open(folder / f"{name}-1.0.tar.gz", "w:gz") as tar:
        tar.add(source / f"{name}-1.0", arcname=f"{name}-1.0")
    shutil.rmtree(source)
    return f"./{name}-1.0.tar.gz"


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_layer_is_built_by_a_step_of_its_own_that_writes_only_it_and_the_job_never_writes_it(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    cache = runtimes.layer_cache_of(alice.pk)
    (cache / "other").mkdir(parents=True, exist_ok=True)  # a layer an earlier job installed
    home = paths.places(local_dc, "alice").home_inside
    put(local_dc, alice, "writes", None)
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "writes"
    build_step = (
        f"import os, sys\n{WRITES}\nwith open(os.path.join(sys.prefix, 'build-step.txt'), 'w') as f:\n"
        f"    f.write('\\n'.join(attempts({home!r}, os.environ['PADDLECLOUD_VENV_CACHE'], sys.prefix)))\n"
    )
    (package / "requirements.txt").write_text(f"# {uuid.uuid4()}\n{sdist(package, 'probe', build_step)}\n")
    (package / "train.py").write_text(
        f"import os\n{WRITES}\nenv = os.environ\n"
        "print(*attempts(env['PADDLECLOUD_HOME'], env['PADDLECLOUD_VENV_CACHE'], env['VIRTUAL_ENV']), sep='\\n')\n"
    )
    assert alice_api.post("/api/v1/jobs", {**BODY, "jobname": "writes"}, format="json").status_code == 201
    job = finished("writes", worker, timeout=300)
    assert job.state == "succeeded", job.message
    # The build step: its own layer only (its home is read-only to it, the rest of the cache not there).
    layer = Path(runtimes.runtime_for(job, package).readonly[-1])  # complete: read-only to the job, last
    assert layer.parent == cache
    found = layer / "build-step.txt"
    built = found.read_text().splitlines()
    assert re.fullmatch(r"home refused (EROFS|EACCES)", built[0]), built
    assert re.fullmatch(r"beside refused (EACCES|EROFS|EPERM)", built[1]), built
    assert re.fullmatch(r"other layer refused (ENOENT|EACCES|EROFS)", built[2]), built
    assert built[3] == "own layer written", built
    # The job: its home, and nothing of the layer cache, not even the layer it runs in.
    text = alice_api.get("/api/v1/jobs/writes/logs?worker=trainer-0").json()["text"]
    assert re.search(r"^home written$", text, re.M), text
    assert re.search(r"^beside refused (EACCES|EROFS|EPERM)$", text, re.M), text
    assert re.search(r"^other layer refused (ENOENT|EACCES|EROFS)$", text, re.M), text  # not even there
    assert re.search(r"^own layer refused (EROFS|EACCES)$", text, re.M), text
    assert not (cache / "hidden.bin").exists() and not (cache / "other" / "x").exists()
    assert (found.parent / "mine.bin").stat().st_size == 4096  # the build step's
    # Trainer 0's log tells the build (pip's words) before its first attempt, which found the layer ready.
    build, _, attempt = text.partition("=== attempt started")
    assert "Successfully installed probe-1.0" in build and f"installing environment {found.parent.name}" in build
    assert f"using cached environment {found.parent.name}" in attempt


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_killed_while_its_layer_is_built_ends_its_build_step(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put(local_dc, alice, "slow", None)
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "slow"
    sleepy = sdist(package, "sleepy", "import time; time.sleep(600)")
    (package / "requirements.txt").write_text(f"# {uuid.uuid4()}\n{sleepy}\n")
    assert alice_api.post("/api/v1/jobs", {**BODY, "jobname": "slow"}, format="json").status_code == 201

    def building() -> dict[str, Any] | None:
        # Pending, saying so (the control worker's first look at it writes the message), its build step recorded.
        job = Job.objects.get(name="slow")
        says = job.message == "installing requirements.txt into its environment"
        return job.engine_data.get("layer-build") if job.state == "pending" and says else None

    record = wait_for(building, "its build step running, the job saying so", 120, watch=worker)
    assert not Job.objects.get(name="slow").workers.filter(state="running").exists()
    assert alice_api.delete("/api/v1/jobs/slow").json()["state"] == "killed"
    build_step = (record["pid"], record["pid_start"])
    wait_for(lambda: not processes.is_alive(*build_step), "the build step gone", 60, watch=worker)
    wait_for(lambda: Job.objects.get(name="slow").released, "the job released", 60, watch=worker)
    assert not processes.is_alive(record["supervisor"], record["supervisor_start"])


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_image_runs_the_job_in_the_registered_runtime(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    # A runtime of only the client (no Paddle): built in seconds, and plainly not the default one.
    Runtime.objects.create(datacenter=local_dc, name="bare", requirements="# the client only\n")
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "rt"
    package.mkdir(parents=True)
    (package / "check.py").write_text(
        "import importlib.util, sys, paddlecloud\n"
        "print('prefix', sys.prefix, 'paddle', importlib.util.find_spec('paddle') is not None, flush=True)\n"
    )
    body = {"jobname": "rt", "entry": "python check.py", "image": "bare"}
    assert alice_api.post("/api/v1/jobs", body, format="json").status_code == 201
    job = finished("rt", worker, timeout=300)
    assert job.state == "succeeded", job.message
    text = alice_api.get("/api/v1/jobs/rt/logs?worker=trainer-0").json()["text"]
    assert "/runtimes/bare-" in text and "paddle False" in text, text
