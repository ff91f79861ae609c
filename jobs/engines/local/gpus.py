"""Host GPUs on the local engine: detect them, hand each to one trainer at a time, give them back.

A datacenter lists its GPUs (`Datacenter.gpus`, indexes as `nvidia-smi -L` prints them). A job takes
all the GPUs it needs at once or none (so two half-served jobs never block each other); each GPU is
one `GpuAssignment` row and the (datacenter, gpu) unique constraint makes two workers unable to hand
out the same GPU, whatever they race on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from django.db import IntegrityError, transaction

from datacenters.models import Datacenter
from jobs.models import GpuAssignment, Job

_GPU_LINE = re.compile(r"^GPU (\d+):")
# Device nodes every CUDA process needs besides its own /dev/nvidia<N>.
_SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def parse_nvidia_smi_list(output: str) -> list[str]:
    """Indexes from `nvidia-smi -L` ("GPU 0: NVIDIA H100 (UUID: GPU-...)"), in order."""
    return [m.group(1) for line in output.splitlines() if (m := _GPU_LINE.match(line.strip()))]


def detect() -> list[str]:
    """This host's GPUs, or [] when there is no nvidia-smi or it fails (no driver, no GPU)."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        result = subprocess.run([binary, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi_list(result.stdout) if result.returncode == 0 else []


def needed(job: Job) -> int:
    return job.trainers * int(job.spec.get("gpu") or 0)


def assigned(job: Job) -> dict[int, list[str]]:
    """trainer index -> its GPUs, for a job that holds them."""
    out: dict[int, list[str]] = {}
    for trainer, gpu in GpuAssignment.objects.filter(job=job).order_by("trainer", "gpu").values_list("trainer", "gpu"):
        out.setdefault(trainer, []).append(gpu)
    return out


def acquire(job: Job) -> bool:
    """Give the job every GPU it needs (True), or none and False when not enough are free."""
    per_trainer = int(job.spec.get("gpu") or 0)
    if per_trainer == 0 or GpuAssignment.objects.filter(job=job).exists():
        return True
    datacenter = job.datacenter
    taken = set(GpuAssignment.objects.filter(datacenter=datacenter).values_list("gpu", flat=True))
    free = [str(g) for g in datacenter.gpus if str(g) not in taken]
    if len(free) < needed(job):
        return False
    rows = [
        GpuAssignment(datacenter=datacenter, gpu=free[t * per_trainer + i], job=job, trainer=t)
        for t in range(job.trainers)
        for i in range(per_trainer)
    ]
    try:
        with transaction.atomic():
            GpuAssignment.objects.bulk_create(rows)
    except IntegrityError:
        return False  # another worker took one of them first; the next reconcile cycle tries again
    return True


def release(job: Job) -> None:
    GpuAssignment.objects.filter(job=job).delete()


def free_count(datacenter: Datacenter) -> int:
    taken = set(GpuAssignment.objects.filter(datacenter=datacenter).values_list("gpu", flat=True))
    return len({str(g) for g in datacenter.gpus} - taken)


def gpu_env(job: Job, trainer: int) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES (host indexes, in nvidia-smi's PCI order) for a trainer holding GPUs."""
    held = assigned(job).get(trainer)
    if not held:
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(held), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def gpu_devices(job: Job, trainer: int) -> list[str]:
    """The /dev/nvidia* nodes the trainer's sandbox must see: its own GPUs plus the shared control nodes.

    /dev/nvidia<N> is assumed to be GPU N of `nvidia-smi -L` (the driver's minor number, which matches
    the index on usual hosts).
    """
    held = assigned(job).get(trainer)
    if not held:
        return []
    nodes = [f"/dev/nvidia{gpu}" for gpu in held] + list(_SHARED_NODES)
    return [node for node in nodes if Path(node).exists()]
