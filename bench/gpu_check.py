"""GPU check on a real GPU host: a 1-trainer `gpu: 1` job through the local engine, and what it sees.

Makes a private SQLite portal under a temp dir, a local datacenter whose GPUs come from `nvidia-smi -L`
(jobs.engines.local.gpus.detect), and runs one trainer with gpu=1 through engine.start() and the reconciler. The job
prints CUDA_VISIBLE_DEVICES, `paddle.device.get_device()` and `nvidia-smi -L` as it sees them; this
script prints the job's log and its final state. The default runtime has the CPU wheel of Paddle: for a
real CUDA check register a runtime with `paddlepaddle-gpu==3.0.0` and pass `--image NAME --requirements FILE`.

    .venv/bin/python bench/gpu_check.py [--image gpu --requirements gpu-requirements.txt]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENTRY = r"""
import os, subprocess
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), flush=True)
try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    print("nvidia-smi -L:", (out.stdout or out.stderr).strip() or f"exit {out.returncode}", flush=True)
except OSError as exc:
    print("nvidia-smi -L: not runnable here:", exc, flush=True)
import paddle
print("paddle", paddle.__version__, "compiled with cuda:", paddle.device.is_compiled_with_cuda(), flush=True)
print("paddle.device.get_device():", paddle.device.get_device(), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="", help="a runtime to register and use (default: the default runtime)")
    parser.add_argument("--requirements", type=Path, help="requirements of --image, e.g. paddlepaddle-gpu==3.0.0")
    parser.add_argument("--assume-gpus", default="", help="dry run without a GPU: a fake list such as 0,1")
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.pop("DATABASE_URL", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)

    from django.contrib.auth.models import User

    from datacenters.models import Datacenter, Engine, StorageKind
    from jobs.engines import engine_for
    from jobs.engines.local import gpus
    from jobs.follow.reconcile import reconcile_datacenter
    from jobs.follow.records import RECORDS
    from jobs.models import TERMINAL_STATES, Job, Runtime

    found = args.assume_gpus.split(",") if args.assume_gpus else gpus.detect()
    print(f"GPUs given to the datacenter: {found or 'none'}")
    if not found:
        raise SystemExit("no GPU on this host: nothing to check")
    user = User.objects.create_user("gpucheck")
    root = var / "pfs"
    dc = Datacenter.objects.create(
        name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL, storage_root=str(root), gpus=found
    )
    if args.image:
        Runtime.objects.create(datacenter=dc, name=args.image, requirements=args.requirements.read_text())
    package = root / "home" / user.username / "jobs" / "gpu"
    package.mkdir(parents=True)
    (package / "check.py").write_text(ENTRY)
    spec = {"jobname": "gpu", "entry": "python check.py", "parallelism": 1, "pservers": 0, "gpu": 1,
            "image": args.image, "datacenter": "local", "cpu": "1", "memory": "4Gi", "max_retries": 0}
    job = Job.objects.create(owner=user, datacenter=dc, name="gpu", uid="gpu-check", spec=spec, state="pending")
    started = time.monotonic()
    engine_for(dc).start(job, RECORDS)  # builds the runtime first if this host has not got it yet
    while time.monotonic() - started < 900:
        reconcile_datacenter(dc)
        job.refresh_from_db()
        if job.state in TERMINAL_STATES and job.released:
            break
        time.sleep(0.5)
    log = root / "home" / user.username / "jobs" / "gpu" / "output" / job.uid / "trainer_0" / "log.txt"
    print(log.read_text() if log.is_file() else f"(no log at {log})")
    print(f"job {job.state} {job.reason} {job.message} in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
