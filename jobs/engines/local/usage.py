"""Live resource use of local job processes: each worker's cgroup, else its process tree (psutil), and its GPUs.

CPU use is a rate: cores = cpu seconds used / wall seconds between two readings of the same cgroup (or process),
so the previous reading of each is kept here (per reconciler process, bounded). A worker's first reading is
measured against its start, so the very first sample already says whether it works.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import OrderedDict
from datetime import datetime

import psutil
from django.utils import timezone

from jobs.engines.local import cgroups, gpus
from jobs.engines.local import world as local_world
from jobs.engines.usage_samples import WorkerUsage
from jobs.models import Job, Role, Worker, WorkerState

_READINGS_KEPT = 10_000  # previous readings remembered (the oldest go first): a few per running worker
_previous: OrderedDict[str, tuple[float, float]] = OrderedDict()  # reading key -> (cpu seconds, monotonic time)
NVIDIA_SMI_TIMEOUT = 5.0  # seconds: a hung driver must not hold the reconciler
_GPU_QUERY = ["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def cpu_seconds(text: str) -> float:
    """CPU seconds used, from v2's cpu.stat (`usage_usec N`) or v1's cpuacct.usage (nanoseconds)."""
    for line in text.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return int(text.strip()) / 1e9


def cores(key: str, used: float, since: datetime | None, now: float | None = None) -> float:
    """Cores used since the last reading of `key` (a cgroup or process); since `since` (its start) at the first."""
    now = time.monotonic() if now is None else now
    before = _previous.pop(key, None)
    _previous[key] = (used, now)
    while len(_previous) > _READINGS_KEPT:
        _previous.popitem(last=False)
    if before is not None and now > before[1] and used >= before[0]:
        return (used - before[0]) / (now - before[1])
    elapsed = (timezone.now() - since).total_seconds() if since else 0.0
    return used / elapsed if elapsed > 0 else 0.0


def parse_gpu_query(output: str) -> dict[str, tuple[float, int]]:
    """GPU index -> (utilisation %, memory used bytes), from nvidia-smi's `index,utilization.gpu,memory.used`
    CSV (MiB); a GPU whose figures are not numbers ("[N/A]") is left out."""
    out: dict[str, tuple[float, int]] = {}
    for line in output.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3:
            try:
                out[fields[0]] = (float(fields[1]), int(float(fields[2]) * 1024 * 1024))
            except ValueError:
                continue
    return out


def _gpu_readings() -> dict[str, tuple[float, int]]:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {}
    try:
        result = subprocess.run(
            [binary, *_GPU_QUERY], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_gpu_query(result.stdout) if result.returncode == 0 else {}


def _from_cgroup(name: str) -> tuple[float, int] | None:
    """(cpu seconds, memory bytes) of the cgroup `name`; None where there is none to read."""
    hierarchy, _ = cgroups.usable()
    if hierarchy is None:
        return None
    cpu, memory = cgroups.live_files(hierarchy, name)
    try:
        return cpu_seconds(cpu.read_text()), int(memory.read_text().strip())
    except (OSError, ValueError):
        return None


def _from_processes(pid: int) -> tuple[float, int] | None:
    """(cpu seconds, resident memory bytes) of the process and its descendants; None once it is gone."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    used, memory = 0.0, 0
    for process in tree:
        try:
            times, rss = process.cpu_times(), process.memory_info().rss
        except psutil.Error:
            continue  # ended between the listing and the look
        used, memory = used + times.user + times.system, memory + rss
    return used, memory


def _gpu_figures(held: list[str], readings: dict[str, tuple[float, int]]) -> tuple[float | None, int | None]:
    seen = [readings[gpu] for gpu in held if gpu in readings]
    if not seen:
        return None, None
    return sum(util for util, _ in seen) / len(seen), sum(memory for _, memory in seen)


def sample(job: Job) -> dict[str, WorkerUsage]:
    """Each running worker's use now, by name; a worker whose cgroup and process cannot be read is left out."""
    held = gpus.assigned(job) if gpus.needed(job) else {}
    readings = _gpu_readings() if held else {}
    out: dict[str, WorkerUsage] = {}
    for worker in Worker.objects.filter(job=job, state=WorkerState.RUNNING).defer("usage_history"):
        record = job.engine_data.get(worker.name)
        group = local_world.group_name(job.uid, worker.name, worker.restarts)
        figures = _from_cgroup(f"{local_world.user_group_name(job.owner_id)}/{group}")
        key = group
        if figures is None and isinstance(record, dict) and "pid" in record:
            figures, key = _from_processes(int(record["pid"])), f"{group}/{record['pid']}"
        if figures is None:
            continue
        mine = held.get(worker.index, []) if worker.role == Role.TRAINER else []  # pservers hold no GPU
        gpu_util, gpu_memory = _gpu_figures(mine, readings)
        out[worker.name] = WorkerUsage(
            cpu_cores=cores(key, figures[0], worker.started_at),
            memory_bytes=figures[1],
            sampled_at=timezone.now(),
            gpu_util=gpu_util,
            gpu_memory_bytes=gpu_memory,
        )
    return out
