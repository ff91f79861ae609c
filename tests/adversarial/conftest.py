"""The adversarial suite's world: every API operation from the OpenAPI generator, and alice's objects.

The operation list comes from drf-spectacular's generator (the same one that serves /api/schema/), so
a new route is in the list the moment it is added to the URL configuration; the tables of the suite
must then name it or their coverage test fails.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.models import ApiToken
from datacenters.models import Datacenter, Quota
from experiments import services as experiments
from experiments.models import Experiment, Trial
from images.models import ImageBuild
from jobs.models import Job, Worker
from notifications.models import NotifyPreference
from registry.models import RegistrySecret
from storage.models import Upload, UploadChunk
from tests.conftest import client_for
from tests.storage.conftest import CHUNK, checksum

MAX_ERROR_BYTES = 8 * 1024  # an error body is a few lines; the issue saw an 18-byte value give 4 MB
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

# Alice's sweep in the world: two trials of the package fit, one at a time.
SWEEP: dict[str, Any] = {
    "name": "grid",
    "params": {"lr": {"values": [0.1, 0.2]}},
    "parallel": 1,
    "template": {"entry": "python train.py", "package": "/pfs/local/home/alice/jobs/fit", "cpu": "0.5"},
}

Operation = tuple[str, str]  # (METHOD, path template as the schema writes it)


@cache
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-any-return]


@cache
def operations() -> list[Operation]:
    """Every (method, path) the API serves, from the OpenAPI generator."""
    found = []
    for path, item in schema()["paths"].items():
        for method in item:
            if method.upper() in HTTP_METHODS:
                found.append((method.upper(), path))
    return sorted(found)


def api_url_patterns() -> list[str]:
    """Every URL pattern under the API prefixes, as Django's resolver lists them."""

    def walk(patterns: list[Any], prefix: str) -> list[str]:
        found = []
        for entry in patterns:
            if isinstance(entry, URLResolver):
                found += walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                found.append(prefix + str(entry.pattern))
        return found

    return [p for p in walk(get_resolver().url_patterns, "/") if p.startswith(("/api/v1/", "/api-token-auth/"))]


@dataclass
class World:
    """Alice's objects, which every persona then tries to reach."""

    alice: User
    bob: User
    carol: User
    datacenter: Datacenter
    root: Path  # the datacenter's storage root on disk
    job: Job
    build: ImageBuild  # alice's image build (written directly: the world's datacenter runs local jobs)
    upload: dict[str, Any]  # alice's open upload, as the API answered it
    experiment: Experiment  # alice's running sweep "grid" over the package fit (its trials not submitted)
    alice_api: APIClient
    bob_api: APIClient
    carol_api: APIClient
    anon_api: APIClient

    def api(self, persona: str) -> APIClient:
        return {"alice": self.alice_api, "bob": self.bob_api, "carol": self.carol_api, "anon": self.anon_api}[persona]


@pytest.fixture
def world(alice: User, bob: User, carol: User, local_dc: Datacenter) -> World:
    root = Path(local_dc.storage_root)
    package = root / "home" / "alice" / "jobs" / "fit"
    package.mkdir(parents=True)
    (package / "train.py").write_text("print('loss 0.1')\n")
    (root / "home" / "alice" / "data.txt").write_text("alice's data\n")
    output = root / "home" / "alice" / "out"
    output.mkdir()
    (root / "home" / "bob").mkdir()
    (root / "public" / "readme.txt").write_text("public\n")
    alice_api = client_for(alice)
    submitted = alice_api.post("/api/v1/jobs", {"jobname": "fit", "entry": "python train.py"}, format="json")
    assert submitted.status_code == 201, submitted.json()
    job = Job.objects.get(name="fit")
    Worker.objects.create(job=job, role="trainer", index=0)
    log = package / "output" / job.uid / "trainer_0" / "log.txt"  # what the log search reads
    log.parent.mkdir(parents=True)
    log.write_text("step 1 loss 0.1\n")
    registry = {"name": "harbor", "server": "harbor.example.com", "username": "robot", "password": "pw"}
    assert alice_api.post("/api/v1/registry", registry, format="json").status_code == 201
    build = ImageBuild.objects.create(
        uid="build-alice001",
        owner=alice,
        datacenter=local_dc,
        package="/pfs/local/home/alice/jobs/fit",
        base_image="harbor.example.com/paddle:3",
        image="harbor.example.com/alice/fit:1",
        registry="harbor",
    )
    data = b"x" * (CHUNK + 10)
    body = {"path": "/pfs/local/home/alice/big.bin", "size": len(data), "checksum": checksum(data), "chunk_size": CHUNK}
    started = alice_api.post("/api/v1/files/uploads", body, format="json")
    assert started.status_code == 201, started.json()
    experiment = experiments.create(alice, SWEEP)  # stored, not advanced: no trial's job exists
    return World(
        alice=alice,
        bob=bob,
        carol=carol,
        datacenter=local_dc,
        root=root,
        job=job,
        build=build,
        upload=started.json(),
        experiment=experiment,
        alice_api=alice_api,
        bob_api=client_for(bob),
        carol_api=client_for(carol),
        anon_api=APIClient(),
    )


def snapshot(world: World) -> dict[str, Any]:
    """Every row a request could create or change, and every file under the storage root."""
    rows: dict[str, Any] = {
        "jobs": sorted(Job.objects.values_list("uid", "state")),
        "workers": Worker.objects.count(),
        "builds": sorted(ImageBuild.objects.values_list("uid", "state")),
        "uploads": sorted((str(u), s) for u, s in Upload.objects.values_list("id", "state")),
        "chunks": UploadChunk.objects.count(),
        "registry": sorted(RegistrySecret.objects.values_list("owner__username", "name", "server")),
        "quota": sorted(map(str, Quota.objects.values_list("user__username", "cpu", "memory", "gpu", "jobs"))),
        "tokens": sorted(ApiToken.objects.filter(revoked_at=None).values_list("pk", flat=True)),
        "users": User.objects.count(),
        "experiments": sorted(Experiment.objects.values_list("uid", "state")),
        "trials": sorted(Trial.objects.values_list("experiment__uid", "index", "state")),
        "notify": sorted(NotifyPreference.objects.values_list("user__username", "email", "webhook")),
    }
    files = []
    for directory, _, names in os.walk(world.root):
        for name in names:
            stat = Path(directory, name).lstat()
            files.append((os.path.relpath(Path(directory, name), world.root), stat.st_size, stat.st_mtime_ns))
        files.append((os.path.relpath(directory, world.root), -1, 0))
    rows["files"] = sorted(files)
    return rows


def error_body(response: Any) -> dict[str, Any]:
    """The one JSON error shape, bounded in size; returns it parsed."""
    assert response["Content-Type"].startswith("application/json"), (response.status_code, response["Content-Type"])
    raw = response.content
    assert len(raw) < MAX_ERROR_BYTES, f"error body is {len(raw)} bytes: {raw[:200]!r}..."
    body: dict[str, Any] = json.loads(raw)
    assert set(body) == {"detail", "code", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert isinstance(body["code"], str) and body["code"], body
    assert isinstance(body["errors"], list), body
    for error in body["errors"]:
        assert set(error) == {"field", "code", "message"}, body
    return body


def names(body: dict[str, Any], word: str) -> bool:
    """Whether the error names `word` (a field, a parameter, a method) as a field or in its text."""
    word = word.lower()
    texts = [body["detail"]] + [f"{e['field'] or ''} {e['message']}" for e in body["errors"]]
    fields = {(e["field"] or "").lower() for e in body["errors"]}
    return word in fields or any(word in text.lower() for text in texts)
