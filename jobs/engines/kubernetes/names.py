"""The names and labels of a job's Kubernetes objects (pure; see manifests.py for the layout they name)."""

from __future__ import annotations

import hashlib
import re

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "paddlecloud"
DATACENTER_LABEL = "paddlecloud.org/datacenter"
USER_LABEL = "paddlecloud.org/user"
JOB_LABEL = "paddlecloud.org/job"
ROLE_LABEL = "paddlecloud.org/role"
BUILD_LABEL = "paddlecloud.org/build"  # an image build's objects (images/), instead of JOB_LABEL
# Set by the controllers on every pod they make.
TRAINER_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation and label of Indexed Job pods
PSERVER_INDEX = "apps.kubernetes.io/pod-index"  # label of StatefulSet pods
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"  # annotation: failures of the index so far

QUOTA_NAME = "paddlecloud-quota"
# The system's namespaces, and the portal's own (deploy/base): a user named so must not get them.
_RESERVED_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease", "paddlecloud"}


def dns_safe(username: str, max_length: int = 63) -> str:
    """A DNS label for a user name: lowercased, other characters -> '-', trimmed, at most max_length.

    If that changed the name at all, a hash of the original is appended, so two names that sanitize
    alike ("Alice" and "alice", "a.b" and "a_b") still get different labels.
    """
    safe = re.sub(r"[^a-z0-9-]+", "-", username.lower())
    safe = re.sub(r"-{2,}", "-", safe).strip("-")
    if safe == username and len(safe) <= max_length:
        return safe
    digest = hashlib.sha256(username.encode()).hexdigest()[:6]
    head = safe[: max_length - len(digest) - 1].rstrip("-") or "user"
    return f"{head}-{digest}"


def namespace_name(prefix: str, username: str) -> str:
    """`<prefix><dns-safe user name>`, at most 63 characters, never a system namespace."""
    room = 63 - len(prefix)
    name = prefix + dns_safe(username, room)
    if name in _RESERVED_NAMESPACES or name.startswith("kube-"):
        digest = hashlib.sha256(username.encode()).hexdigest()[:6]
        name = f"{name[: 63 - 7]}-{digest}"
    return name


def trainer_job_name(uid: str) -> str:
    return f"{uid}-trainer"


def pserver_set_name(uid: str) -> str:
    return f"{uid}-ps"


def pserver_host(uid: str, index: int) -> str:
    return f"{pserver_set_name(uid)}-{index}.{uid}"


def trainer_host(uid: str, index: int) -> str:
    # Indexed Job pods get the host name <job name>-<index>; with subdomain <uid> that is a DNS name.
    return f"{trainer_job_name(uid)}-{index}.{uid}"


# The replicated jobs of a job's JobSet (jobset.py); "ps" is short: a pod `<uid>-ps-0-<i>-<5>` must fit 63.
JOBSET_PSERVERS = "ps"
JOBSET_TRAINERS = "trainer"


def jobset_child(uid: str, replicated_job: str) -> str:
    """The one Job JobSet makes of a replicated job of JobSet `<uid>` (job index 0)."""
    return f"{uid}-{replicated_job}-0"


UID_SUFFIX = len("-abcde")  # what jobs.services adds to a job's name to make its uid
_POD_SUFFIX = len("-abcde")  # the random tail of a pod's name, which JobSet's webhook counts in


def jobset_name_problem(jobname: str, trainers: int, pservers: int) -> str | None:
    """Why JobSet's webhook (jobset v0.11 ValidateCreate) would refuse the JobSet of this job, or None.

    It refuses a JobSet whose longest pod name `<uid>-<replicated job>-<job index>-<pod index>-abcde`
    exceeds 63 characters: with our 46-character uids that is reachable (a 40-character name), so a kueue
    datacenter refuses it at submit instead of leaving the job to fail at its start.
    """
    uid_length = len(jobname) + UID_SUFFIX
    for replicated, count in ((JOBSET_TRAINERS, trainers), (JOBSET_PSERVERS, pservers)):
        if not count:
            continue
        fixed = len(f"-{replicated}-0-") + len(str(count - 1)) + _POD_SUFFIX
        if uid_length + fixed > 63:
            return (
                f"at most {63 - fixed - UID_SUFFIX} characters on this Kueue datacenter with {count} "
                f"{'trainers' if replicated == JOBSET_TRAINERS else 'pservers'}: JobSet names their pods "
                f"<name>-<5>-{replicated}-0-<index>-<5> and refuses names over 63 characters"
            )
    return None


def registry_secret_name(registry: str) -> str:
    return f"pcr-{registry}"


def datacenter_selector(datacenter: str) -> str:
    """The label selector of every job object the engine made in one datacenter (image builds excluded)."""
    return f"{MANAGED_BY}={MANAGER},{DATACENTER_LABEL}={datacenter},!{BUILD_LABEL}"


def builds_selector(datacenter: str) -> str:
    """The label selector of every image build's objects in one datacenter."""
    return f"{MANAGED_BY}={MANAGER},{DATACENTER_LABEL}={datacenter},{BUILD_LABEL}"


def build_job_name(uid: str) -> str:
    return uid  # "build-<suffix>": already unique, short, and DNS-safe


def job_selector(uid: str, role: str | None = None) -> str:
    selector = f"{MANAGED_BY}={MANAGER},{JOB_LABEL}={uid}"
    return f"{selector},{ROLE_LABEL}={role}" if role else selector
