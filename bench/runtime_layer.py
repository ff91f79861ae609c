"""Time to start a job whose requirements.txt adds one small package to the default runtime (first and second time).

Runs the launcher with the runtime's python (`-m paddlecloud.runtime.launcher`), outside a sandbox: the layer's
install is the same venvcache.ensure_layer the local engine's build step runs before a job. With a
fresh per-user layer cache, an entry that only echoes, and a requirements.txt of Paddle's two pins plus one
small package. The first start installs a layer (the package only; Paddle comes from the base), the second
finds it ready. Building the base itself (once per host) is reported separately when it was needed.

    .venv/bin/python bench/runtime_layer.py [--package tabulate]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from paddlecloud.contract import venvcache
from paddlecloud.contract.jobenv import PREFIX, JobEnv

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REQUIREMENTS = "paddlepaddle==3.0.0\nprotobuf<7\n"


def start_once(python: Path, package: Path, cache: Path, output: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith((PREFIX, "PADDLE_", "VIRTUAL_ENV"))}
    env |= JobEnv(
        role="trainer",
        index=0,
        trainers=1,
        pservers=0,
        trainer_hosts=("127.0.0.1",),
        trainer_ports=(40123,),
        package_dir=str(package),
        output_dir=str(output),
        entry="echo entry-started",
        venv_cache=str(cache),
        pod_ip="127.0.0.1",
    ).to_env()
    started = time.monotonic()
    result = subprocess.run(
        [str(python), "-m", "paddlecloud.runtime.launcher"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    elapsed = time.monotonic() - started
    if result.returncode != 0 or "entry-started" not in result.stdout:
        raise SystemExit(f"launcher exited {result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-2000:]}")
    return elapsed, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="tabulate", help="the one small package the job adds")
    args = parser.parse_args()
    t0 = time.monotonic()
    base = venvcache.ensure_base(
        "default", DEFAULT_REQUIREMENTS, ROOT / "client", venvcache.default_cache_dir() / "runtimes", lambda line: None
    )
    print(f"base runtime {base} ready in {time.monotonic() - t0:.1f}s (built once per host; 0 when cached)")
    with tempfile.TemporaryDirectory(prefix="bench-layer-") as tmp:
        work = Path(tmp)
        package = work / "package"
        package.mkdir()
        (package / "requirements.txt").write_text(f"{DEFAULT_REQUIREMENTS}{args.package}\n")
        for attempt in ("first", "second"):
            elapsed, out = start_once(base / "bin" / "python", package, work / "layers", work / "output")
            installed = [line for line in out.splitlines() if "Installing collected packages" in line]
            print(f"{attempt} start: {elapsed:.2f}s  ({installed[0].strip() if installed else 'nothing installed'})")
        size = sum(f.stat().st_size for f in (work / "layers").rglob("*") if f.is_file() and not f.is_symlink())
        print(f"layer size: {size / 2**20:.1f} MiB (the base is not copied)")


if __name__ == "__main__":
    main()
