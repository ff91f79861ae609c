"""Every kubernetes job pod, in both layouts, tells its launcher to wait for its NetworkPolicies (the node's address
from the downward API, the datacenter's kubelet port), unless the datacenter turned the wait off."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from datacenters.models import Datacenter
from jobs.engines.kubernetes import jobset
from jobs.engines.kubernetes import manifests as m
from jobs.models import Job
from tests.jobs.test_log_links import kube_dc  # noqa: F401 - a fixture

SPEC = {"parallelism": 2, "pservers": 1, "entry": "python train.py"}


def env_of(template: dict[str, Any]) -> dict[str, str]:
    result = {}
    for var in template["spec"]["containers"][0]["env"]:
        result[var["name"]] = var.get("value") or f"<{var['valueFrom']['fieldRef']['fieldPath']}>"
    return result


def pod_templates(plan: m.Plan) -> list[dict[str, Any]]:
    """The pserver and trainer pod templates of the portal layout (StatefulSet + Job) and of the JobSet."""
    owner = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": plan.uid, "uid": "u-1"}}
    portal = [m.pserver_set(plan, owner)["spec"]["template"], m.trainer_job(plan, owner)["spec"]["template"]]
    kueue = [r["template"]["spec"]["template"] for r in jobset.jobset(plan)["spec"]["replicatedJobs"]]
    return portal + kueue


def plan_of(alice: User, dc: Datacenter) -> m.Plan:
    job = Job.objects.create(owner=alice, datacenter=dc, name="fit", uid="fit-ab12c", spec=SPEC)
    return m.plan_for(job, dc)


def test_every_pod_waits_for_the_kubelet_port_of_its_own_node(alice: User, kube_dc: Datacenter) -> None:  # noqa: F811
    templates = pod_templates(plan_of(alice, kube_dc))
    assert len(templates) == 4
    for template in templates:
        env = env_of(template)
        assert env["PADDLECLOUD_ISOLATION_PORT"] == "10250"
        assert env["PADDLECLOUD_NODE_IP"] == "<status.hostIP>"


@pytest.mark.parametrize("port", [1, 10250, 65535])
def test_the_datacenters_kubelet_port_is_the_target(alice: User, kube_dc: Datacenter, port: int) -> None:  # noqa: F811
    kube_dc.kubelet_port = port
    kube_dc.clean_fields()
    for template in pod_templates(plan_of(alice, kube_dc)):
        assert env_of(template)["PADDLECLOUD_ISOLATION_PORT"] == str(port)


def test_a_datacenter_without_network_policies_turns_the_wait_off(alice: User, kube_dc: Datacenter) -> None:  # noqa: F811
    kube_dc.wait_for_isolation = False
    for template in pod_templates(plan_of(alice, kube_dc)):
        env = env_of(template)
        assert "PADDLECLOUD_ISOLATION_PORT" not in env and "PADDLECLOUD_NODE_IP" not in env


@pytest.mark.parametrize("port", [0, 65536])
def test_a_kubelet_port_out_of_range_is_refused_naming_the_field(kube_dc: Datacenter, port: int) -> None:  # noqa: F811
    kube_dc.kubelet_port = port
    with pytest.raises(ValidationError) as caught:
        kube_dc.clean_fields()
    assert set(caught.value.message_dict) == {"kubelet_port"}
