"""Pure rules of image builds: references, who may push where, the Dockerfile, the builder's manifests."""

from __future__ import annotations

from typing import Any

import pytest
from paddlecloud.contract.dockerfile import runtime_dockerfile
from paddlecloud.contract.imageref import BadReference, image_problem, parse_image, push_problem

from images import builder, tasks
from jobs.engines.capabilities import BuildStatus
from jobs.engines.kubernetes import kaniko as b
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.rules import ca_problem
from jobs.engines.kubernetes.storage import Storage


@pytest.mark.parametrize(
    ("text", "domain", "path", "tag"),
    [
        ("paddle", "docker.io", "paddle", ""),
        ("paddlepaddle/paddle:3.0.0", "docker.io", "paddlepaddle/paddle", "3.0.0"),
        ("10.244.0.1:5000/alice/fit:1", "10.244.0.1:5000", "alice/fit", "1"),
        ("localhost/x", "localhost", "x", ""),
        ("Registry.Example.com/a/b__c.d-e", "registry.example.com", "a/b__c.d-e", ""),
        ("index.docker.io/library/python:3.11", "docker.io", "library/python", "3.11"),
    ],
)
def test_good_references_parse_into_domain_path_and_tag(text: str, domain: str, path: str, tag: str) -> None:
    ref = parse_image(text)
    assert (ref.domain, ref.path, ref.tag) == (domain, path, tag)


def test_a_digest_is_kept() -> None:
    digest = "sha256:" + "a" * 64
    assert parse_image(f"r.io/x@{digest}").digest == digest


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "required"),
        ("r.io/UPPER/case", "path component"),
        ("r.io/x:", "tag"),
        ("r.io/x:-bad", "tag"),
        ("r.io/x@sha256:zz", "digest"),
        ("r.io/a//b", "path component"),
        ("r.io/x y", "spaces"),
        ("r.io/x\n", "spaces"),
        ("-bad.io/x", "registry host"),
        ("r.io/" + "a" * 400, "limit"),
        ("r.io/" + "a" * 260, "limit is 255"),
    ],
)
def test_bad_references_are_refused_naming_the_rule(text: str, words: str) -> None:
    problem = image_problem(text)
    assert problem is not None and words in problem
    with pytest.raises(BadReference):
        parse_image(text)


@pytest.mark.parametrize(
    ("image", "server", "ok"),
    [
        ("r.io:5000/alice/fit:1", "r.io:5000", True),
        ("r.io:5000/alice/fit:1", "https://r.io:5000", True),
        ("r.io:5000/alice/fit:1", "r.io:5000/alice", True),
        ("r.io:5000/alicex/fit:1", "r.io:5000/alice", False),
        ("r.io:5000/bob/fit:1", "r.io:5000/alice", False),
        ("other.io/alice/fit:1", "r.io", False),
        ("r.io/alice/fit:1", "r.io:5000", False),
        ("alice/fit:1", "https://index.docker.io/v1/", True),
        ("alice/fit:1", "r.io", False),
        ("r.io/alice/fit@sha256:" + "a" * 64, "r.io", False),  # Kaniko would refuse it only when it pushes
        ("r.io/alice/fit:1@sha256:" + "a" * 64, "r.io", False),
    ],
)
def test_an_image_must_be_on_the_secrets_registry_and_under_its_path(image: str, server: str, ok: bool) -> None:
    assert (push_problem(parse_image(image), server) is None) is ok


def test_the_dockerfile_copies_the_package_as_the_job_user_and_keeps_the_base_user() -> None:
    text = runtime_dockerfile("r.io/paddle:3", dest="/workspace/package", copy_owner="1000:1000", base_user="1000:1000")
    assert text.splitlines() == [
        "FROM r.io/paddle:3",
        "COPY --chown=1000:1000 . /workspace/package/",
        "WORKDIR /workspace/package",
    ]
    assert "RUN" not in text  # no requirements: the base needs no shell and the build no network


def test_the_dockerfile_installs_requirements_as_root_then_drops_to_the_job_user() -> None:
    lines = runtime_dockerfile("r.io/paddle:3", requirements=True, base_user="1000:1000").splitlines()
    run = next(i for i, line in enumerate(lines) if line.startswith("RUN"))
    assert lines[run - 1] == "USER root"
    assert "pip install" in lines[run] and "requirements.txt" in lines[run]
    assert lines[-1] == "USER 1000:1000"


def _plan(**overrides: Any) -> b.BuildPlan:
    values: dict[str, Any] = {
        "uid": "build-abc12345",
        "username": "alice",
        "datacenter": "dc1",
        "namespace": "paddle-alice",
        "builder_image": "r.io/kaniko:1",
        "package": "home/alice/jobs/fit",
        "image": "r.io/alice/fit:1",
        "dockerfile": "FROM x\n",
        "registry_secret": "pcr-mine",
        "storage": Storage(kind="hostpath", host_path="/srv/pfs"),
    }
    return b.BuildPlan(**{**values, **overrides})


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_the_builder_mounts_only_the_package_read_only_and_the_secret_as_docker_config() -> None:
    job = b.build_job(_plan())
    pod = _pod(job)
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The volume is the home (the user cannot replace it); the package a subPath (links may not leave it).
    assert volumes["package"]["hostPath"] == {"path": "/srv/pfs/home/alice", "type": "Directory"}
    assert pod["containers"][0]["volumeMounts"][0]["subPath"] == "jobs/fit"
    assert volumes["docker-config"]["secret"]["secretName"] == "pcr-mine"
    assert volumes["docker-config"]["secret"]["items"] == [{"key": ".dockerconfigjson", "path": "config.json"}]
    container = pod["containers"][0]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert all(m["readOnly"] for m in mounts.values())
    assert (
        mounts["package"]["mountPath"] == "/kaniko/buildcontext"
        and mounts["docker-config"]["mountPath"] == "/kaniko/.docker"
    )
    assert "--destination=r.io/alice/fit:1" in container["args"]
    assert "--context=dir:///kaniko/buildcontext" in container["args"]
    assert "ca" not in volumes and all(e["name"] != "SSL_CERT_DIR" for e in container["env"])
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert pod["automountServiceAccountToken"] is False
    assert container["resources"]["limits"] == {
        "cpu": b.BUILD_CPU, "memory": b.BUILD_MEMORY, "ephemeral-storage": b.BUILD_DISK_LIMIT
    }
    assert container["resources"]["requests"]["ephemeral-storage"] == b.BUILD_DISK_REQUEST
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "securityContext" not in container  # Kaniko needs the default capabilities (chown, setuid...)


def test_builder_objects_carry_the_build_label_and_never_the_job_label() -> None:
    job = b.build_job(_plan())
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        assert labels[names.BUILD_LABEL] == "build-abc12345"
        assert names.JOB_LABEL not in labels
    assert f"!{names.BUILD_LABEL}" in names.datacenter_selector("dc1")


@pytest.mark.parametrize(
    ("storage", "key", "path"),
    [
        (Storage(kind="nfs", nfs_server="nfs.local", nfs_path="/export"), "nfs", "/export/home/alice"),
        (Storage(kind="cephfs", cephfs_monitors=("m:6789",), cephfs_path="/pfs"), "cephfs", "/pfs/home/alice"),
    ],
)
def test_network_storage_mounts_the_home_with_the_package_as_sub_path(storage: Storage, key: str, path: str) -> None:
    pod = _pod(b.build_job(_plan(storage=storage)))
    assert pod["volumes"][0][key]["path"] == path and pod["volumes"][0][key]["readOnly"] is True
    assert pod["containers"][0]["volumeMounts"][0]["subPath"] == "jobs/fit"


def test_the_home_itself_as_package_has_no_sub_path_and_a_package_outside_it_is_refused() -> None:
    pod = _pod(b.build_job(_plan(package="home/alice")))
    assert "subPath" not in pod["containers"][0]["volumeMounts"][0]
    with pytest.raises(ValueError, match="not in home/alice"):
        b.build_job(_plan(package="home/bob/jobs/fit"))


def test_a_pvc_package_is_a_read_only_sub_path_of_the_claim() -> None:
    pod = _pod(b.build_job(_plan(storage=Storage(kind="pvc", pvc_name="pfs"))))
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "pfs", "readOnly": True}
    assert pod["containers"][0]["volumeMounts"][0]["subPath"] == "home/alice/jobs/fit"


def test_a_datacenter_ca_is_mounted_and_trusted_beside_the_system_certs() -> None:
    plan = _plan(ca_pem="-----BEGIN CERTIFICATE-----\n...")
    pod = _pod(b.build_job(plan))
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["SSL_CERT_DIR"] == "/kaniko/ssl/certs:/paddlecloud/ca"
    config = b.build_config(plan, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u1"}})
    assert config["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert config["data"]["Dockerfile"] == "FROM x\n"
    assert config["metadata"]["ownerReferences"][0] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": "u1",
        "controller": False,
        "blockOwnerDeletion": False,
    }


def test_a_bad_ca_is_named() -> None:
    assert ca_problem("not a cert") is not None


def _job(condition: str | None) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "message": "deadline"}] if condition else []
    return {"status": {"conditions": conditions}}


def _builder_pod(state: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": {"containerStatuses": [{"state": state}]}}


def test_a_complete_job_succeeds_with_the_digest_from_the_termination_message() -> None:
    digest = "sha256:" + "b" * 64
    pod = _builder_pod({"terminated": {"exitCode": 0, "message": digest}})
    status = b.observe_build(_job("Complete"), [pod], 5, 600)
    assert status.done and status.succeeded and status.digest == digest


def test_a_failed_job_fails_with_the_last_error_line() -> None:
    log = "INFO[0000] Retrieving image\nerror building image: GET https://r.io/v2/: UNAUTHORIZED\n"
    pod = _builder_pod({"terminated": {"exitCode": 1, "message": log}})
    status = b.observe_build(_job("Failed"), [pod], 5, 600)
    assert status.done and not status.succeeded
    assert status.message == "error building image: GET https://r.io/v2/: UNAUTHORIZED"


def test_a_builder_stuck_pulling_fails_only_after_the_pending_timeout() -> None:
    pod = _builder_pod({"waiting": {"reason": "ImagePullBackOff", "message": "not found"}})
    early = b.observe_build(_job(None), [pod], 5, 600)
    assert not early.done and "ImagePullBackOff" in early.message
    late = b.observe_build(_job(None), [pod], 601, 600)
    assert late.done and not late.succeeded and "ImagePullBackOff" in late.message


def test_a_running_build_is_just_running() -> None:
    assert b.observe_build(_job(None), [_builder_pod({"running": {}})], 5, 600) == BuildStatus()


@pytest.mark.parametrize(
    ("log", "line"),
    [
        ("a\nERRO[0002] bad thing\nb\n", "ERRO[0002] bad thing"),
        ("a\nlast\n", "last"),
        ("", ""),
        ("x" * 5000, "x" * b.MAX_MESSAGE),
    ],
)
def test_last_error_line(log: str, line: str) -> None:
    assert b.last_error_line(log) == line


def test_start_build_retries_are_bounded_and_poll_waits_longer_than_any_countdown() -> None:
    countdowns = [tasks.retry_countdown(n) for n in range(tasks.START_RETRIES + 3)]
    assert countdowns[:5] == [5, 10, 20, 40, 60] and max(countdowns) == tasks.MAX_COUNTDOWN
    assert builder.STUCK_START.total_seconds() > tasks.MAX_COUNTDOWN
    assert tasks.start_build.max_retries == tasks.START_RETRIES


def test_a_builder_that_cannot_be_scheduled_or_made_fails_after_the_pending_timeout() -> None:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/1 nodes are available: 1 Insufficient cpu."}  # fmt: skip
    unschedulable = {"metadata": {"name": "p"}, "status": {"conditions": [condition]}}
    early = b.observe_build(_job(None), [unschedulable], 5, 600)
    assert not early.done and "cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu." in early.message
    assert b.observe_build(_job(None), [unschedulable], 601, 600).done
    no_pod = b.observe_build(_job(None), [], 601, 600)  # a ResourceQuota refused it: the Job made none
    assert no_pod.done and not no_pod.succeeded and "made no pod" in no_pod.message
    starting = {"status": {"active": 1, "conditions": []}}
    assert b.observe_build(starting, [], 5, 600) == BuildStatus()  # just created: not stuck yet
