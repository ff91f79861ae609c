"""The kubernetes engine end to end on the real control plane, driven directly (engine + reconciler).

kwok plays the kubelet: trainer pods get their fate from `engine_data["pod_annotations"]` (the
engine's test hook), pservers run until deleted, and pod logs are whatever the test told kwok to serve.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines import engine_for
from jobs.engines.base import TransientEngineError
from jobs.engines.capabilities import Reaper
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes.engine import KubernetesEngine
from jobs.follow.reconcile import reconcile_datacenter
from jobs.follow.records import RECORDS
from jobs.models import Job, JobState
from registry.models import RegistrySecret
from tests.k8s.engine_helpers import (
    DELAY,
    EXIT_CODE,
    FATE,
    drive,
    finished,
    job_in,
    kill,
    new_job,
    nothing_left,
    objects_of,
    start,
    submit,
)
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster, free_ports

pytestmark = pytest.mark.django_db

HANG = {FATE: "hang"}


def archived(job: Job, worker: str) -> str:
    role, _, index = worker.partition("-")
    path = Path(job.datacenter.storage_root) / "home" / job.owner.username / "jobs" / job.name / "output"
    return (path / job.uid / f"{role}_{index}" / "log.txt").read_text()


def test_trainers_succeed_then_pservers_stop_and_every_log_is_archived(
    k8s_dc: Datacenter, alice: User, k8s_cluster: TestCluster, k8s_api: k8s.ApiClient
) -> None:
    job = new_job(
        k8s_dc,
        alice,
        {"jobname": "fit", "parallelism": 2, "pservers": 2},
        trainer_annotations={FATE: "succeed", DELAY: "3s"},
    )
    ns = f"{k8s_dc.namespace_prefix}alice"
    k8s_cluster.set_namespace_log_lines(ns, ["step 1 loss 2.5", "step 2 loss 0.7", "trainer done"])
    job = start(job)
    for i in range(2):
        k8s_cluster.set_pod_log_lines(ns, f"{job.uid}-ps-{i}", [f"pserver {i} serving", f"pserver {i} still serving"])

    running = drive(k8s_dc, lambda: job_in(job, "running"), "running")
    assert running.trainers_running == 2 and running.pservers_running == 2
    engine = engine_for(k8s_dc)
    live = engine.read_log(job, "trainer-1", "")
    assert live.text == "step 1 loss 2.5\nstep 2 loss 0.7\ntrainer done\n" and not live.complete
    assert engine.read_log(job, "trainer-1", live.cursor).text == ""

    job = drive(k8s_dc, lambda: finished(job), "success")
    assert (job.state, job.reason, job.exit_code) == ("succeeded", "", 0)
    assert job.trainers_succeeded == 2 and job.pservers_running == 0
    workers = {w.name: w.state for w in job.workers.all()}
    assert workers == {
        "pserver-0": "succeeded",
        "pserver-1": "succeeded",
        "trainer-0": "succeeded",
        "trainer-1": "succeeded",
    }
    left = objects_of(k8s_api, job.uid)
    assert left["StatefulSet"] == [] and not any("-ps-" in pod for pod in left["Pod"])
    # The trainers' Job and the Service stay until the datacenter's TTL.
    assert left["Service"] == [job.uid] and left["Job"] == [f"{job.uid}-trainer"]

    for i in range(2):
        assert archived(job, f"trainer-{i}") == "step 1 loss 2.5\nstep 2 loss 0.7\ntrainer done\n"
        assert archived(job, f"pserver-{i}") == f"pserver {i} serving\npserver {i} still serving\n"
    chunk = engine.read_log(job, "trainer-1", live.cursor)
    assert chunk.text == "" and chunk.complete  # the same cursor goes on in the archive
    whole = engine.read_log(job, "pserver-0", "")
    assert whole.text == "pserver 0 serving\npserver 0 still serving\n" and whole.complete

    assert engine.cleanup(job, RECORDS)
    wait_for(lambda: nothing_left(k8s_api, job.uid), "the garbage collector to delete everything")


def test_a_trainer_failing_with_3_is_retried_then_fails_with_backoff_limit(
    k8s_dc: Datacenter, alice: User, k8s_cluster: TestCluster, k8s_api: k8s.ApiClient
) -> None:
    ns = f"{k8s_dc.namespace_prefix}alice"
    k8s_cluster.set_namespace_log_lines(ns, ["=== attempt started", "boom"])
    fate = {FATE: "fail", EXIT_CODE: "3", DELAY: "300ms"}
    job = submit(k8s_dc, alice, {"jobname": "bad", "parallelism": 1, "max_retries": 2}, trainer_annotations=fate)
    # The Job controller waits 10 s, then 20 s, between attempts of one index.
    job = drive(k8s_dc, lambda: finished(job), "failure")  # CLUSTER_WAIT covers the 30 s
    assert (job.state, job.reason, job.exit_code) == ("failed", "BackoffLimit", 3)
    assert job.message == "trainer 0 exited with code 3 after 2 restart(s)"
    trainer = job.workers.get(role="trainer", index=0)
    assert (trainer.state, trainer.exit_code, trainer.restarts) == ("failed", 3, 2)
    assert archived(job, "trainer-0").count("=== attempt started") == 3
    assert len(objects_of(k8s_api, job.uid)["Pod"]) == 3  # one pod per attempt, kept with the Job


def test_more_gpus_than_any_node_has_is_unschedulable_then_pending_timeout(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    job = submit(k8s_dc, alice, {"jobname": "greedy", "parallelism": 1, "gpu": 8, "pending_timeout": 5})
    pending = drive(k8s_dc, lambda: job_in(job, "pending") if Job.objects.get(pk=job.pk).reason else None, "a reason")
    assert pending.reason == "Unschedulable"
    assert pending.message.startswith("trainer 0: 0/3 nodes are available") and "nvidia.com/gpu" in pending.message
    job = drive(k8s_dc, lambda: finished(job), "pending timeout")
    assert (job.state, job.reason) == ("failed", "PendingTimeout")
    assert job.message.startswith("still pending after 5s (trainer 0: 0/3 nodes are available")
    assert objects_of(k8s_api, job.uid)["Pod"] == []  # the suspended Job deleted its pending pod


def test_kill_deletes_everything_and_the_name_is_reusable_at_once(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    spec = {"jobname": "long", "parallelism": 2, "pservers": 1}
    job = submit(k8s_dc, alice, spec, trainer_annotations=HANG)
    drive(k8s_dc, lambda: job_in(job, "running"), "running")
    job = kill(job)
    assert (job.state, job.reason, job.released) == ("killed", "Killed", True)
    again = submit(k8s_dc, alice, spec, trainer_annotations=HANG)  # same name, new uid: no clash
    assert again.uid != job.uid
    drive(k8s_dc, lambda: job_in(again, "running"), "the new run to run")
    wait_for(lambda: nothing_left(k8s_api, job.uid), "the garbage collector to delete the killed run")
    kill(again)
    wait_for(lambda: nothing_left(k8s_api, again.uid), "the second run to be gone")


def test_two_users_get_separate_namespaces_and_only_their_own_registry_secret(
    k8s_dc: Datacenter, alice: User, bob: User, k8s_api: k8s.ApiClient
) -> None:
    RegistrySecret.objects.create(owner=alice, name="private", server="reg.example", username="a", password="s3cret")
    a = submit(k8s_dc, alice, {"jobname": "a", "registry": "private"}, trainer_annotations=HANG)
    b = submit(k8s_dc, bob, {"jobname": "b"}, trainer_annotations=HANG)
    core = k8s.CoreV1Api(k8s_api)
    ns_a, ns_b = a.engine_data["namespace"], b.engine_data["namespace"]
    assert (ns_a, ns_b) == (f"{k8s_dc.namespace_prefix}alice", f"{k8s_dc.namespace_prefix}bob")
    assert core.read_namespace(ns_b).metadata.labels["paddlecloud.org/user"] == "bob"
    assert [s.metadata.name for s in core.list_namespaced_secret(ns_a).items if s.metadata.name.startswith("pcr-")] == [
        "pcr-private"
    ]
    everywhere = core.list_secret_for_all_namespaces(
        label_selector=f"paddlecloud.org/datacenter={k8s_dc.name}", field_selector="type=kubernetes.io/dockerconfigjson"
    ).items
    assert [(s.metadata.namespace, s.metadata.name) for s in everywhere] == [(ns_a, "pcr-private")]
    assert {p.metadata.namespace for p in core.list_namespaced_pod(ns_b).items} <= {ns_b}
    drive(k8s_dc, lambda: job_in(a, "running") and job_in(b, "running"), "both running")
    # A new password reaches the namespace with alice's next job.
    secret = RegistrySecret.objects.get(owner=alice, name="private")
    secret.password = "n3w"
    secret.save()
    a2 = submit(k8s_dc, alice, {"jobname": "a2", "registry": "private"}, trainer_annotations=HANG)
    config = json.loads(base64.b64decode(core.read_namespaced_secret("pcr-private", ns_a).data[".dockerconfigjson"]))
    assert config["auths"]["reg.example"]["password"] == "n3w"
    for job in (a, a2, b):
        kill(job)


def test_a_quota_rejection_is_a_clear_reason_then_fails_the_job(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    k8s_dc.default_cpu = "2"
    k8s_dc.save()
    job = submit(k8s_dc, alice, {"jobname": "big", "parallelism": 1, "cpu": "4", "pending_timeout": 8})
    pending = drive(k8s_dc, lambda: job_in(job, "pending") if Job.objects.get(pk=job.pk).reason else None, "a reason")
    assert pending.reason == "QuotaExceeded"
    assert "exceeded quota: paddlecloud-quota" in pending.message and "requests.cpu=4" in pending.message
    job = drive(k8s_dc, lambda: finished(job), "quota failure")
    assert (job.state, job.reason) == ("failed", "QuotaExceeded")  # after half the pending timeout, not at it
    assert "exceeded quota" in job.message
    # Its trainers' Job is suspended: no pod appears later, when quota frees up.
    trainers = k8s.BatchV1Api(k8s_api).read_namespaced_job(f"{job.uid}-trainer", job.engine_data["namespace"])
    assert trainers.spec.suspend is True


def test_a_trainer_whose_rendezvous_could_not_complete_fails_the_job_naming_it(k8s_dc: Datacenter, alice: User) -> None:
    """The launcher exits 72 when the trainers' gloo rendezvous misses its bound (paddlecloud.contract.exitcodes)."""
    job = submit(
        k8s_dc, alice, {"jobname": "gloo"}, trainer_annotations={FATE: "fail", EXIT_CODE: "72", DELAY: "500ms"}
    )
    job = drive(k8s_dc, lambda: finished(job), "the rendezvous failure")
    assert (job.state, job.reason, job.exit_code) == ("failed", "RendezvousTimeout", 72)


def test_oomkilled_image_pull_and_a_lost_pserver_are_named(k8s_dc: Datacenter, alice: User) -> None:
    oom = submit(
        k8s_dc, alice, {"jobname": "oom", "memory": "512Mi"}, trainer_annotations={FATE: "oomkilled", DELAY: "500ms"}
    )
    pull = submit(k8s_dc, alice, {"jobname": "pull", "image": "registry.example/invalid-image:1"})
    lost = submit(
        k8s_dc,
        alice,
        {"jobname": "lost", "pservers": 2, "parallelism": 1},
        trainer_annotations=HANG,
        pserver_annotations={FATE: "fail", EXIT_CODE: "137", DELAY: "3s"},
    )
    drive(
        k8s_dc,
        lambda: finished(oom) and finished(lost) and Job.objects.get(pk=pull.pk).reason == "ImagePullBackOff",
        "every job's reason",
    )
    oom.refresh_from_db()
    assert (oom.state, oom.reason, oom.exit_code) == ("failed", "OOMKilled", 137)
    assert oom.message == "trainer 0 went over its memory limit (512Mi) and was OOMKilled (exit code 137)"
    lost.refresh_from_db()
    assert (lost.state, lost.reason) == ("failed", "PserverLost")
    # kwok fails the pod (a kubelet would restart its container); the StatefulSet controller deletes
    # and replaces a failed pod at once, so the reconciler sees the failure, the gap or the replacement.
    assert lost.message.startswith("pserver ") and lost.message.endswith("; the job cannot go on without it")
    seen = ("exited with code 137", "was replaced by a new pod", "vanished (its pod was deleted)")
    assert any(what in lost.message for what in seen), lost.message
    assert lost.exit_code in (137, None)
    assert lost.workers.get(role="trainer").state == "killed"
    pull.refresh_from_db()
    assert pull.state == "pending"
    assert pull.message.startswith("trainer 0: ") and "ImagePullBackOff" in pull.message
    kill(pull)


def test_reconcile_without_watches_lists_a_datacenter_with_three_calls_whatever_the_number_of_jobs(
    k8s_dc: Datacenter, alice: User, bob: User
) -> None:
    # A process that does not mirror the cluster (the control worker does: tests/k8s/test_watch.py).
    jobs = [
        submit(k8s_dc, user, {"jobname": f"n{i}", "pservers": i % 2}, trainer_annotations=HANG)
        for i, user in enumerate([alice, bob, alice, bob, alice])
    ]
    drive(k8s_dc, lambda: all(job_in(j, "running") for j in jobs), "all running")
    kube.reset_calls()
    reconcile_datacenter(k8s_dc)
    assert kube.total_calls() == 3, dict(kube.CALLS)
    assert set(kube.CALLS) == {"LIST Pod", "LIST Job", "LIST StatefulSet"}
    for job in jobs:
        kill(job)


def test_a_start_interrupted_half_way_creates_only_what_is_missing(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    job = new_job(k8s_dc, alice, {"jobname": "retry", "pservers": 1}, trainer_annotations=HANG)
    engine = engine_for(k8s_dc)
    assert isinstance(engine, KubernetesEngine)
    real_create = engine.k8s.create

    def crash_on_job(kind: str, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        if kind == "Job":
            raise TransientEngineError("connection reset")
        return real_create(kind, namespace, body)

    with mock.patch.object(engine.k8s, "create", side_effect=crash_on_job), pytest.raises(TransientEngineError):
        engine.start(job, RECORDS)
    assert objects_of(k8s_api, job.uid)["StatefulSet"] == [f"{job.uid}-ps"]
    assert objects_of(k8s_api, job.uid)["Job"] == []
    start(job)  # the retried task
    start(job)  # and once more for good measure
    found = objects_of(k8s_api, job.uid)
    assert (found["Service"], found["StatefulSet"], found["Job"]) == (
        [job.uid],
        [f"{job.uid}-ps"],
        [f"{job.uid}-trainer"],
    )
    drive(k8s_dc, lambda: job_in(job, "running"), "running")
    assert len(objects_of(k8s_api, job.uid)["Pod"]) == 2
    kill(job)


def test_the_reaper_deletes_objects_whose_job_row_is_gone(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep = submit(k8s_dc, alice, {"jobname": "keep"}, trainer_annotations=HANG)
    orphan = submit(k8s_dc, alice, {"jobname": "orphan", "pservers": 1}, trainer_annotations=HANG)
    Job.objects.filter(pk=orphan.pk).delete()
    monkeypatch.setattr("jobs.engines.kubernetes.engine.REAP_GRACE_SECONDS", 0)
    engine = engine_for(k8s_dc)
    assert isinstance(engine, Reaper)
    assert engine.reap() == 1  # its Service; the garbage collector takes the rest
    wait_for(lambda: nothing_left(k8s_api, orphan.uid), "the orphan to be gone")
    assert objects_of(k8s_api, keep.uid)["Service"] == [keep.uid]
    kill(keep)


def test_an_unreachable_cluster_is_transient(k8s_dc: Datacenter, alice: User) -> None:
    [closed] = free_ports(1)  # nothing listens there
    k8s_dc.kubeconfig = re.sub(r"https://127\.0\.0\.1:\d+", f"https://127.0.0.1:{closed}", k8s_dc.kubeconfig)
    k8s_dc.save()
    job = new_job(k8s_dc, alice, {"jobname": "nowhere"})
    with pytest.raises(TransientEngineError, match="cannot reach the Kubernetes API server"):
        engine_for(k8s_dc).start(job, RECORDS)
    job.state = JobState.PENDING
    with pytest.raises(TransientEngineError):
        engine_for(k8s_dc).poll([job], RECORDS)


def test_a_root_worker_hands_the_home_and_output_folder_to_the_pods_uid(
    k8s_dc: Datacenter, alice: User, settings: Any
) -> None:
    """Found by real pods: the launcher (uid 1000) could not write its log in a folder a root worker made."""
    settings.PADDLECLOUD_POD_UID, settings.PADDLECLOUD_POD_GID = 4321, 4322
    job = submit(k8s_dc, alice, {"jobname": "owned", "parallelism": 1, "pservers": 0}, trainer_annotations=HANG)
    home = Path(k8s_dc.storage_root) / "home" / "alice"
    output = home / "jobs" / "owned" / "output" / job.uid
    assert output.is_dir()
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in (home, home / "jobs", output.parent, output)}
    assert owners == ({(4321, 4322)} if os.geteuid() == 0 else {(os.geteuid(), os.getegid())})
    kill(job)
