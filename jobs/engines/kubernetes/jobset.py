"""The JobSet layout of a job (datacenters with `admission: kueue`), built as plain dicts by pure functions.

For a job `<uid>` in the user's namespace:

- JobSet `<uid>`, created suspended, labelled as every job object (manifests.labels) plus
  `kueue.x-k8s.io/queue-name: paddlecloud` (the user's LocalQueue, kueue.py): Kueue admits it whole,
  all its pods or none, and unsuspends it.
- `kueue.x-k8s.io/priority-class: paddlecloud-<class>` (kueue.workload_priority_class): Kueue's order and
  preemption between the user's jobs.
- Replicated job `ps` (only with pservers): one Indexed Job `<uid>-ps-0`, completions = parallelism =
  pservers, pods restart in place (OnFailure; a restart is still PserverLost, status.py).
- Replicated job `trainer`: one Indexed Job `<uid>-trainer-0` with the trainer Job's retry rules.
- The JobSet's headless Service `<uid>` (network.subdomain) gives pod `<uid>-<rjob>-0-<i>` the DNS name
  `<uid>-<rjob>-0-<i>.<uid>`; every pod reads its index from the completion-index annotation.
- Success when every trainer succeeded; no restarts (maxRestarts 0): a failure fails the job, with
  today's reasons (status.py reads the child Jobs and their pods as it reads the other layout's).

The job's NetworkPolicy is owned by the JobSet: deleting the JobSet deletes everything of the job.
"""

from __future__ import annotations

from typing import Any

from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes import names

API_VERSION = "jobset.x-k8s.io/v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # the Workload's priority (kueue.workload_priority_class)
LOCAL_QUEUE = "paddlecloud"  # the LocalQueue in every user's namespace (kueue.local_queue)
PSERVERS = names.JOBSET_PSERVERS
TRAINERS = names.JOBSET_TRAINERS
LAYOUT = "jobset"  # engine_data["layout"] of a job started this way


def host(uid: str, replicated_job: str, index: int) -> str:
    """The DNS name JobSet gives pod `index` of a replicated job (enableDNSHostnames, subdomain `<uid>`)."""
    return f"{names.jobset_child(uid, replicated_job)}-{index}.{uid}"


def hosts(plan: m.Plan) -> m.Hosts:
    completion_index = f"metadata.annotations['{names.TRAINER_INDEX}']"  # set on every Indexed Job's pods
    return m.Hosts(
        pservers=tuple(host(plan.uid, PSERVERS, i) for i in range(plan.pservers)),
        trainers=tuple(host(plan.uid, TRAINERS, i) for i in range(plan.trainers)),
        pserver_index=completion_index,
        trainer_index=completion_index,
    )


def _pod(plan: m.Plan, role: str) -> dict[str, Any]:
    template = m.pod_template(plan, role, hosts(plan))
    template["spec"].pop("subdomain", None)  # JobSet sets it (network.subdomain)
    if role == "pserver":
        template["spec"]["restartPolicy"] = "OnFailure"  # a Job's pods may not be Always
    return template


def _replicated_job(plan: m.Plan, name: str, role: str, count: int, job_spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"completionMode": "Indexed", "completions": count, "parallelism": count, **job_spec}
    spec["template"] = _pod(plan, role)
    return {"name": name, "replicas": 1, "template": {"metadata": {"labels": m.labels(plan, role)}, "spec": spec}}


def jobset(plan: m.Plan, priority_class: str = "") -> dict[str, Any]:
    """The job's JobSet, suspended until Kueue admits it; `priority_class`: the Kueue WorkloadPriorityClass."""
    replicated = []
    if plan.pservers:
        replicated.append(_replicated_job(plan, PSERVERS, "pserver", plan.pservers, {}))
    trainer_rules = {
        "backoffLimitPerIndex": plan.max_retries,
        "maxFailedIndexes": 0,  # one trainer out of retries fails the job at once
        "podReplacementPolicy": "Failed",  # never two trainers with one id
    }
    replicated.append(_replicated_job(plan, TRAINERS, "trainer", plan.trainers, trainer_rules))
    priority = {PRIORITY_LABEL: priority_class} if priority_class else {}
    return {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": {
            "name": plan.uid,
            "namespace": plan.namespace,
            "labels": {**m.labels(plan), QUEUE_LABEL: LOCAL_QUEUE, **priority},
        },
        "spec": {
            "suspend": True,
            "network": {"enableDNSHostnames": True, "subdomain": plan.uid, "publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [TRAINERS]},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": replicated,
        },
    }


def suspended(obj: dict[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))
