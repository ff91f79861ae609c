"""The Kubernetes objects of one job, built as plain dicts by pure functions (no cluster calls).

For a job `<uid>` (its name + a 5-character suffix) of user U in datacenter D:

- Namespace `<prefix><dns-safe U>` (shared by U's jobs; created on first use) with the ResourceQuota
  `paddlecloud-quota` from U's compute quota, U's registry secret `pcr-<registry name>` and the
  NetworkPolicies of policies.py (default deny, DNS, the egress D allows; `<uid>-peers` per job);
  their manifests are in namespaces.py.
- Service `<uid>`: headless, publishNotReadyAddresses, selects the job's pods. It is the job's
  **owner object**: the StatefulSet and the Job carry an ownerReference to it, so deleting the Service
  (background propagation) lets the garbage collector delete everything else of the job.
- StatefulSet `<uid>-ps` (serviceName `<uid>`, only when pservers > 0) -> pods `<uid>-ps-<i>`,
  DNS `<uid>-ps-<i>.<uid>`. Not `<uid>-pserver`: the StatefulSet controller labels each pod with
  `controller-revision-hash=<set name>-<10-char hash>`, which must fit a 63-character label value,
  so a set name longer than 52 characters makes every pod creation fail (a 46-character uid would).
- Indexed Job `<uid>-trainer` (completion index = trainer id, backoffLimitPerIndex = max_retries,
  maxFailedIndexes 0, restartPolicy Never, subdomain `<uid>`) -> DNS `<uid>-trainer-<i>.<uid>`.

Every object carries `app.kubernetes.io/managed-by=paddlecloud`, `paddlecloud.org/datacenter`,
`paddlecloud.org/user`, `paddlecloud.org/job` and (pods, sets, Jobs) `paddlecloud.org/role`: the
reconciler lists a whole datacenter with one selector per kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from paddlecloud.contract.jobenv import env_name

from datacenters.models import Datacenter, StorageKind
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.storage import Storage
from jobs.engines.launch import Launch, Peers, SpecFacts
from jobs.files import layout, logfiles
from jobs.models import Job

LAUNCHER = "paddlecloud-launch"
# Every pod has its own IP, so fixed ports never collide.
PSERVER_PORT = 7164
TRAINER_PORT = 7165
GLOO_PORT = 7166  # the gloo HTTP store on pserver 0 (PS mode)
MASTER_PORT = 7167  # PADDLE_MASTER on trainer 0 (collective mode)
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Plan:
    """Everything the manifests of one job depend on."""

    uid: str
    name: str
    username: str
    datacenter: str
    namespace: str
    trainers: int
    pservers: int
    image: str
    cpu: str
    memory: str
    gpu: int
    pscpu: str
    psmemory: str
    max_retries: int
    entry: str
    passes: int
    package_dir: str  # logical /pfs/... paths: what users see, and where pods mount the storage
    output_dir: str
    storage: Storage
    env: dict[str, str] = field(default_factory=dict)
    registry_secret: str = ""
    trainer_annotations: dict[str, str] = field(default_factory=dict)
    pserver_annotations: dict[str, str] = field(default_factory=dict)
    grace_seconds: int = 10
    run_as: tuple[int, int] = (1000, 1000)  # (uid, gid) of every container: settings.PADDLECLOUD_POD_UID/GID
    pull_policy: str = "IfNotPresent"  # see pull_policy()
    log_limit: int | None = None  # bytes of each worker's log.txt the launcher keeps (datacenter.job_log_limit)
    attempt: int = 1  # the job's run: one more after each preemption (jobs/scheduling) or failure's restart
    restart_reason: str | None = None  # where the attempt before failed and was restarted (Job.restarted_after)
    isolation_port: int | None = None  # the node's kubelet port: the launcher waits until it is out of reach
    facts: SpecFacts = field(default_factory=SpecFacts)  # params, experiment, trial, checkpoint (launch.SpecFacts)

    @property
    def user_label(self) -> str:
        return names.dns_safe(self.username)

    @property
    def home_mount(self) -> str:
        return f"/pfs/{self.datacenter}/home/{self.username}"

    @property
    def public_mount(self) -> str:
        return f"/pfs/{self.datacenter}/{self.storage.public_path}"

    @property
    def launch(self) -> Launch:
        """What every worker's launcher is told about the job (jobs.engines.launch: the same on both engines)."""
        return Launch(
            job_name=self.name,
            datacenter=self.datacenter,
            username=self.username,
            trainers=self.trainers,
            pservers=self.pservers,
            entry=self.entry,
            passes=self.passes,
            attempt=self.attempt,
            package_dir=self.package_dir,
            home=self.home_mount,
            output_dir=self.output_dir,
            log_limit=self.log_limit,
            isolation_port=self.isolation_port,
            facts=self.facts,
            restart_reason=self.restart_reason,
        )


def pull_policy(image: str, datacenter: Datacenter) -> str:
    """`Always` for an image the user chose: the kubelet then asks the registry, with this job's own
    login, even when the node has the image cached, so no user runs another's private image from a
    node's cache. The datacenter's own images are everyone's, and may be cached (or preloaded)."""
    return "IfNotPresent" if image in (datacenter.cpu_image, datacenter.gpu_image) else "Always"


def plan_for(job: Job, datacenter: Datacenter, namespace: str | None = None) -> Plan:
    """The job's plan. `engine_data["pod_annotations"]` / `["pserver_annotations"]` (engine-private)
    are copied onto the trainer / pserver pods: the tests' way to choose what kwok does with a pod."""
    spec = job.spec
    username = job.owner.get_username()
    gpu = int(spec.get("gpu") or 0)
    image = spec.get("image") or (datacenter.gpu_image if gpu > 0 else datacenter.cpu_image)
    package = spec.get("package") or layout.default_package(datacenter, job.owner, job.name)
    output = layout.logical(datacenter, layout.output_dir(datacenter, username, job.name, job.uid))
    data = job.engine_data or {}
    return Plan(
        uid=job.uid,
        name=job.name,
        username=username,
        datacenter=datacenter.name,
        namespace=namespace or names.namespace_name(datacenter.namespace_prefix, username),
        trainers=job.trainers,
        pservers=job.pservers,
        image=image,
        pull_policy=pull_policy(image, datacenter),
        cpu=str(spec.get("cpu") or "1"),
        memory=str(spec.get("memory") or "1Gi"),
        gpu=gpu,
        pscpu=str(spec.get("pscpu") or "1"),
        psmemory=str(spec.get("psmemory") or "1Gi"),
        max_retries=int(spec.get("max_retries") or 0),
        entry=spec["entry"],
        passes=int(spec.get("passes") or 1),
        package_dir=package,
        output_dir=output,
        storage=Storage.of(datacenter),
        env=dict(spec.get("env") or {}),
        registry_secret=names.registry_secret_name(spec["registry"]) if spec.get("registry") else "",
        trainer_annotations=dict(data.get("pod_annotations") or {}),
        pserver_annotations=dict(data.get("pserver_annotations") or {}),
        grace_seconds=int(getattr(settings, "PADDLECLOUD_KILL_GRACE_SECONDS", 10)),
        run_as=(settings.PADDLECLOUD_POD_UID, settings.PADDLECLOUD_POD_GID),
        log_limit=logfiles.log_limit(datacenter),
        attempt=job.attempt,
        restart_reason=job.restarted_after(),
        isolation_port=datacenter.kubelet_port if datacenter.wait_for_isolation else None,
        facts=SpecFacts.of(spec),
    )


# ----- labels -----


def user_labels(datacenter: str, username: str) -> dict[str, str]:
    return {
        names.MANAGED_BY: names.MANAGER,
        names.DATACENTER_LABEL: datacenter,
        names.USER_LABEL: names.dns_safe(username),
    }


def labels(plan: Plan, role: str | None = None) -> dict[str, str]:
    result = {**user_labels(plan.datacenter, plan.username), names.JOB_LABEL: plan.uid}
    if role:
        result[names.ROLE_LABEL] = role
    return result


def _meta(plan: Plan, name: str, role: str | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": plan.namespace, "labels": labels(plan, role)}
    if owner:
        meta["ownerReferences"] = [owner]
    return meta


# ----- per-job objects -----


def service(plan: Plan) -> dict[str, Any]:
    ports = [("pserver", PSERVER_PORT), ("trainer", TRAINER_PORT), ("gloo", GLOO_PORT), ("master", MASTER_PORT)]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, plan.uid),
        "spec": {
            "clusterIP": "None",
            # Peers must resolve each other before they are Ready (pservers wait for trainers and back).
            "publishNotReadyAddresses": True,
            "selector": {names.JOB_LABEL: plan.uid},
            "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports],
        },
    }


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    """A reference to the job's Service: dependents are deleted by the garbage collector with it.

    Not blockOwnerDeletion: that would need `update services/finalizers` where the
    OwnerReferencesPermissionEnforcement admission plugin runs, and deletion is background anyway.
    """
    return {
        "apiVersion": owner.get("apiVersion", "v1"),
        "kind": owner.get("kind", "Service"),
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }


def _volumes(plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts): the user's home read-write, the public area read-only, at their /pfs paths."""
    s = plan.storage
    home_rel = f"home/{plan.username}"
    mounts: list[dict[str, Any]] = [
        {"name": "pfs-home", "mountPath": plan.home_mount},
        {"name": "pfs-public", "mountPath": plan.public_mount, "readOnly": True},
    ]

    def under(root: str, rel: str) -> str:
        return f"{root.rstrip('/')}/{rel}"

    if s.kind == StorageKind.PVC:
        # One claim (it must exist in the user's namespace); subPath keeps the pod inside home/<user>.
        mounts[0]["subPath"] = home_rel
        mounts[1]["subPath"] = s.public_path
        for m in mounts:
            m["name"] = "pfs"
        return [{"name": "pfs", "persistentVolumeClaim": {"claimName": s.pvc_name}}], mounts
    if s.kind == StorageKind.NFS:
        home: dict[str, Any] = {"nfs": {"server": s.nfs_server, "path": under(s.nfs_path, home_rel)}}
        public: dict[str, Any] = {
            "nfs": {"server": s.nfs_server, "path": under(s.nfs_path, s.public_path), "readOnly": True}
        }
    elif s.kind == StorageKind.CEPHFS:
        ceph = {"monitors": list(s.cephfs_monitors), "user": s.cephfs_user, "secretRef": {"name": s.cephfs_secret_name}}
        home = {"cephfs": {**ceph, "path": under(s.cephfs_path, home_rel)}}
        public = {"cephfs": {**ceph, "path": under(s.cephfs_path, s.public_path), "readOnly": True}}
    else:  # hostPath (a directory every node mounts the shared filesystem at)
        home = {"hostPath": {"path": under(s.host_path, home_rel), "type": "DirectoryOrCreate"}}
        public = {"hostPath": {"path": under(s.host_path, s.public_path), "type": "DirectoryOrCreate"}}
    return [{"name": "pfs-home", **home}, {"name": "pfs-public", **public}], mounts


@dataclass(frozen=True)
class Hosts:
    """Where a job's workers are found (their DNS names) and where a pod reads its own index."""

    pservers: tuple[str, ...]
    trainers: tuple[str, ...]
    pserver_index: str  # a fieldRef path
    trainer_index: str = f"metadata.annotations['{names.TRAINER_INDEX}']"


def hosts(plan: Plan) -> Hosts:
    """The workers of the Service + StatefulSet + Job layout (the JobSet's are jobset.hosts)."""
    return Hosts(
        pservers=tuple(names.pserver_host(plan.uid, i) for i in range(plan.pservers)),
        trainers=tuple(names.trainer_host(plan.uid, i) for i in range(plan.trainers)),
        pserver_index=f"metadata.labels['{names.PSERVER_INDEX}']",
    )


def env(plan: Plan, role: str, where: Hosts | None = None) -> list[dict[str, Any]]:
    """The launcher's env (jobs.engines.launch), with the user's own variables first and the pod's own fields."""
    where = where or hosts(plan)
    peers = Peers(
        pserver_hosts=where.pservers,
        pserver_ports=(PSERVER_PORT,),
        trainer_hosts=where.trainers,
        trainer_ports=(TRAINER_PORT,),
        gloo_port=GLOO_PORT,
        master_port=MASTER_PORT,
    )
    facts = plan.launch.env(role, peers)
    result: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(plan.env.items())]
    result += [{"name": k, "value": v} for k, v in facts.items()]
    # The index comes from what the controller set on the pod (the launcher also falls back to
    # JOB_COMPLETION_INDEX and to the StatefulSet host name's ordinal).
    index_field = where.trainer_index if role == "trainer" else where.pserver_index
    result.append({"name": env_name("index"), "valueFrom": {"fieldRef": {"fieldPath": index_field}}})
    result.append({"name": env_name("pod_ip"), "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if plan.isolation_port is not None:  # the node: an address the namespace's policies block in every mode
        result.append({"name": env_name("node_ip"), "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
    return result


def resources(cpu: str, memory: str, gpu: int = 0) -> dict[str, Any]:
    amounts: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu:
        amounts[GPU_RESOURCE] = str(gpu)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def pod_template(plan: Plan, role: str, where: Hosts | None = None) -> dict[str, Any]:
    volumes, mounts = _volumes(plan)
    if role == "trainer":
        res = resources(plan.cpu, plan.memory, plan.gpu)
        ports = [("trainer", TRAINER_PORT), ("master", MASTER_PORT)]
        annotations = plan.trainer_annotations
    else:
        res = resources(plan.pscpu, plan.psmemory)
        ports = [("pserver", PSERVER_PORT), ("gloo", GLOO_PORT)]
        annotations = plan.pserver_annotations
    container = {
        "name": role,
        "image": plan.image,
        "imagePullPolicy": plan.pull_policy,
        "command": [LAUNCHER],
        "env": env(plan, role, where),
        "ports": [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in ports],
        "resources": res,
        "volumeMounts": mounts,
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never" if role == "trainer" else "Always",
        # User code gets no API credentials and no env of other Services.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        # The uid the engine hands the job's folders to, whatever USER the image says; never root.
        "securityContext": {"runAsUser": plan.run_as[0], "runAsGroup": plan.run_as[1], "runAsNonRoot": True},
        "terminationGracePeriodSeconds": plan.grace_seconds,
        "containers": [container],
        "volumes": volumes,
    }
    if role == "trainer":
        spec["subdomain"] = plan.uid  # pserver pods get theirs from the StatefulSet's serviceName
    if plan.registry_secret:
        spec["imagePullSecrets"] = [{"name": plan.registry_secret}]
    metadata: dict[str, Any] = {"labels": labels(plan, role)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": spec}


def pserver_set(plan: Plan, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(plan, names.pserver_set_name(plan.uid), "pserver", owner_reference(owner)),
        "spec": {
            "serviceName": plan.uid,
            "replicas": plan.pservers,
            "podManagementPolicy": "Parallel",  # all at once: nothing waits for pserver 0 to be Ready
            "selector": {"matchLabels": {names.JOB_LABEL: plan.uid, names.ROLE_LABEL: "pserver"}},
            "template": pod_template(plan, "pserver"),
        },
    }


def trainer_job(plan: Plan, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(plan, names.trainer_job_name(plan.uid), "trainer", owner_reference(owner)),
        "spec": {
            "completionMode": "Indexed",
            "completions": plan.trainers,
            "parallelism": plan.trainers,
            "backoffLimitPerIndex": plan.max_retries,
            "maxFailedIndexes": 0,  # one trainer out of retries fails the job at once
            # A replacement starts only once the failed pod is gone: never two trainers with one id.
            "podReplacementPolicy": "Failed",
            "template": pod_template(plan, "trainer"),
        },
    }
