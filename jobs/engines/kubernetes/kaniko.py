"""The Kubernetes objects of one image build (pure): a Kaniko Job and the ConfigMap with its Dockerfile; its status.
(builds.py makes them, as the engine's ImageBuilds capability.)

For build `<uid>` (`build-<suffix>`) of user U, in U's namespace (the one U's jobs use):

- Job `<uid>`: one pod, restartPolicy Never, backoffLimit 0, activeDeadlineSeconds BUILD_TIMEOUT_SECONDS.
  The container runs the datacenter's `builder_image` (a Kaniko executor) with
  `--context dir:///kaniko/buildcontext --dockerfile /paddlecloud/build/Dockerfile --destination <image>`.
  It mounts the package folder **read-only** at /kaniko/buildcontext (from the same storage job pods mount:
  the volume is the user's home and the package its subPath, so a link swapped in cannot lead out), the
  registry secret `pcr-<name>` as /kaniko/.docker/config.json (Kaniko pushes and pulls the base with it),
  and the ConfigMap. Kaniko unpacks the base image over the container's own
  root, so the pod runs as root (no privileges, no host access, the runtime's default seccomp profile
  and capabilities: that is what Kaniko is for), with 1Gi-20Gi of node disk; it gets no
  service-account token and no Service env.
- ConfigMap `<uid>`: the Dockerfile (contract.dockerfile) and, when the datacenter has one,
  `ca.crt` (its `builder_ca`), mounted at /paddlecloud/ca and added to Go's trust through SSL_CERT_DIR.
  Its ownerReference is the Job, so deleting the Job deletes it too.
- NetworkPolicy `<uid>-registry` (policies.py), also owned by the Job: the builder pod may reach its
  registry's address and port; the namespace's policies deny the rest (egress to the outside only
  where the datacenter allows jobs egress).

Labels: the user's labels plus `paddlecloud.org/build=<uid>` (never `paddlecloud.org/job`: the job
reconciler's selector excludes builds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from datacenters.models import StorageKind
from jobs.engines.capabilities import BuildStatus
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.manifests import owner_reference, resources, user_labels
from jobs.engines.kubernetes.storage import Storage

CONTAINER = "build"
CONTEXT = "/kaniko/buildcontext"  # under /kaniko: never part of the image (the package goes to /workspace/package)
CONFIG_DIR = "/paddlecloud/build"
CA_DIR = "/paddlecloud/ca"
DOCKER_CONFIG = "/kaniko/.docker"
BUILD_TIMEOUT_SECONDS = 3600  # a build still running after this fails (DeadlineExceeded)
BUILD_CPU = "1"  # counted against the user's compute quota like a job's pods
BUILD_MEMORY = "2Gi"
# Kaniko unpacks the base and writes the layers on the node's disk: a bound, so one build cannot fill it
# (the kubelet evicts the pod past the limit; the build fails with that reason).
# No disk request: a node that does not report ephemeral storage (local storage isolation off, as on
# the test node) could never schedule a request; the limit still evicts a build that fills the disk.
BUILD_DISK_REQUEST = "0"
BUILD_DISK_LIMIT = "20Gi"
SYSTEM_CERTS = "/kaniko/ssl/certs"  # the builder image's own CAs (outside /kaniko Kaniko replaces the filesystem)


@dataclass(frozen=True)
class BuildPlan:
    """Everything the manifests of one build depend on."""

    uid: str
    username: str
    datacenter: str
    namespace: str
    builder_image: str
    package: str  # the package folder, relative to the storage root (home/<user>/...), links resolved
    image: str  # where the result is pushed
    dockerfile: str
    registry_secret: str  # pcr-<name>
    storage: Storage
    ca_pem: str = ""
    timeout_seconds: int = BUILD_TIMEOUT_SECONDS

    @property
    def labels(self) -> dict[str, str]:
        return {**user_labels(self.datacenter, self.username), names.BUILD_LABEL: self.uid}


def _home_and_rest(plan: BuildPlan) -> tuple[str, str]:
    """The user's home (relative to the storage root) and the package beneath it ("" for the home itself)."""
    home, rel = f"home/{plan.username}", plan.package.strip("/")
    if rel == home:
        return home, ""
    if not rel.startswith(f"{home}/"):
        raise ValueError(f"the package {rel} is not in {home}")
    return home, rel[len(home) + 1 :]


def _package_volume(plan: BuildPlan) -> dict[str, Any]:
    # The volume is the user's home, which the user cannot replace; the package is a subPath beneath it.
    # The package itself could be swapped for a link between the portal's check and the kubelet's mount
    # (by the user's own jobs); the kubelet refuses a subPath whose links leave its volume.
    s, (home, _) = plan.storage, _home_and_rest(plan)

    def under(root: str) -> str:
        return f"{root.rstrip('/')}/{home}"

    if s.kind == StorageKind.PVC:
        return {"name": "package", "persistentVolumeClaim": {"claimName": s.pvc_name, "readOnly": True}}
    if s.kind == StorageKind.NFS:
        return {"name": "package", "nfs": {"server": s.nfs_server, "path": under(s.nfs_path), "readOnly": True}}
    if s.kind == StorageKind.CEPHFS:
        ceph = {"monitors": list(s.cephfs_monitors), "user": s.cephfs_user, "secretRef": {"name": s.cephfs_secret_name}}
        return {"name": "package", "cephfs": {**ceph, "path": under(s.cephfs_path), "readOnly": True}}
    # hostPath: the home must exist already (the portal checked the package), never be created empty.
    return {"name": "package", "hostPath": {"path": under(s.host_path), "type": "Directory"}}


def _package_sub_path(plan: BuildPlan) -> str:
    home, rest = _home_and_rest(plan)
    if plan.storage.kind == StorageKind.PVC:
        # A claim is one volume for every user: its subPath links are checked against the whole claim,
        # not the user's home (a limit of PVC storage; the kubelet offers no narrower check).
        return f"{home}/{rest}".rstrip("/")
    return rest


def _mounts(plan: BuildPlan) -> list[dict[str, Any]]:
    package: dict[str, Any] = {"name": "package", "mountPath": CONTEXT, "readOnly": True}
    sub_path = _package_sub_path(plan)
    if sub_path:
        package["subPath"] = sub_path
    mounts = [
        package,
        {"name": "docker-config", "mountPath": DOCKER_CONFIG, "readOnly": True},
        {"name": "build-config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]
    if plan.ca_pem:
        mounts.append({"name": "ca", "mountPath": CA_DIR, "readOnly": True})
    return mounts


def _volumes(plan: BuildPlan) -> list[dict[str, Any]]:
    config = names.build_job_name(plan.uid)
    volumes = [
        _package_volume(plan),
        {
            "name": "docker-config",
            "secret": {
                "secretName": plan.registry_secret,
                "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
            },
        },
        {"name": "build-config", "configMap": {"name": config, "items": [{"key": "Dockerfile", "path": "Dockerfile"}]}},
    ]
    if plan.ca_pem:
        volumes.append({"name": "ca", "configMap": {"name": config, "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
    return volumes


def builder_args(plan: BuildPlan) -> list[str]:
    return [
        f"--dockerfile={CONFIG_DIR}/Dockerfile",
        f"--context=dir://{CONTEXT}",
        f"--destination={plan.image}",
        # The pushed digest becomes the pod's termination message: the build's result, exactly.
        "--digest-file=/dev/termination-log",
        "--verbosity=info",
        "--log-format=text",  # no colour codes in the archived log and the build's message
        # Kaniko refuses to run where it cannot tell it is in a container (its check misses pods in a
        # cgroup v2 namespace); this is always a pod of its own, so the check guards nothing here.
        "--force",
    ]


def _resources() -> dict[str, Any]:
    amounts = resources(BUILD_CPU, BUILD_MEMORY)
    amounts["requests"]["ephemeral-storage"] = BUILD_DISK_REQUEST
    amounts["limits"]["ephemeral-storage"] = BUILD_DISK_LIMIT
    return amounts


def build_job(plan: BuildPlan) -> dict[str, Any]:
    env = [{"name": "DOCKER_CONFIG", "value": DOCKER_CONFIG}]
    if plan.ca_pem:
        env.append({"name": "SSL_CERT_DIR", "value": f"{SYSTEM_CERTS}:{CA_DIR}"})
    container = {
        "name": CONTAINER,
        "image": plan.builder_image,
        "args": builder_args(plan),
        "env": env,
        "resources": _resources(),
        "volumeMounts": _mounts(plan),
        # No capabilities are dropped: Kaniko runs the Dockerfile's steps as root in its own filesystem
        # and needs chown, setuid/setgid, fowner, dac_override... of the default set to unpack and COPY.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    name = names.build_job_name(plan.uid)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": plan.namespace, "labels": plan.labels},
        "spec": {
            "backoffLimit": 0,  # a failed build is reported, not retried: its log says why
            "activeDeadlineSeconds": plan.timeout_seconds,
            "template": {
                "metadata": {"labels": plan.labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "enableServiceLinks": False,
                    "containers": [container],
                    "volumes": _volumes(plan),
                },
            },
        },
    }


def build_config(plan: BuildPlan, owner: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap of the Dockerfile (and CA); `owner` is the created Job, so it goes with it."""
    data = {"Dockerfile": plan.dockerfile}
    if plan.ca_pem:
        data["ca.crt"] = plan.ca_pem
    reference = {**owner_reference(owner), "apiVersion": "batch/v1", "kind": "Job"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": names.build_job_name(plan.uid),
            "namespace": plan.namespace,
            "labels": plan.labels,
            "ownerReferences": [reference],
        },
        "data": data,
    }


# Kaniko's own prefixes of an error line: "error building image: ...", "ERRO[0003] ..."
_ERROR_MARKERS = ("error", "erro[", "fatal")
MAX_MESSAGE = 1000


def last_error_line(log: str) -> str:
    """The builder's last error line (what a failed build reports), else its last line; bounded."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if any(marker in line.lower() for marker in _ERROR_MARKERS)]
    chosen = errors[-1] if errors else (lines[-1] if lines else "")
    return chosen[:MAX_MESSAGE]


# ----- status -----

STUCK_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def observe_build(job: dict[str, Any], pods: list[dict[str, Any]], age: float, pending_timeout: float) -> BuildStatus:
    """The build's status from its Job and pods (pure). `age`: seconds since it started building."""
    pod = pods[-1] if pods else {}
    state = _container(pod).get("state") or {}
    if _condition(job, "Complete"):
        message = str((state.get("terminated") or {}).get("message") or "").strip()
        return BuildStatus(done=True, succeeded=True, digest=message if message.startswith("sha256:") else "")
    failed = _condition(job, "Failed")
    if failed:
        term = state.get("terminated") or {}
        detail = str(term.get("message") or "").strip() or str(failed.get("message") or failed.get("reason") or "")
        return BuildStatus(done=True, message=last_error_line(detail) or "the builder failed")
    stuck = _stuck(job, pod, state)
    if stuck:
        message = stuck[:MAX_MESSAGE]
        return BuildStatus(done=age > pending_timeout, message=message)
    return BuildStatus()


def _stuck(job: dict[str, Any], pod: dict[str, Any], state: dict[str, Any]) -> str:
    """Why the builder is not running yet, when it is stuck (not merely slow): its image cannot be
    pulled, its pod cannot be scheduled, or the Job cannot make its pod (a quota refusal); else ""."""
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in STUCK_REASONS:
        return f"the builder pod is waiting: {waiting['reason']}: {waiting.get('message') or ''}".strip()
    conditions: list[dict[str, Any]] = (pod.get("status") or {}).get("conditions") or []
    scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return f"the builder pod cannot be scheduled: {scheduled.get('message') or ''}".strip()
    if not pod and (_condition(job, "FailureTarget") or not (job.get("status") or {}).get("active")):
        return "the builder Job has made no pod yet (a quota or admission refusal?)"
    return ""
