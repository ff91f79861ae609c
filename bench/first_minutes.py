"""A newcomer's first minutes: `make run` in a fresh clone until the example job has succeeded, timed.

Each run clones this repository's HEAD into a temporary folder and runs `make run` there on a free port with
XDG_CACHE_HOME pointed at a cache folder (pip's, uv's and the runtime cache all live under it): an empty one
for a cold start, the one a cold run filled for a warm start. `--pip` installs without uv (PADDLECLOUD_NO_UV=1:
the portal's venv and the runtime base both with pip), for comparison. Prints one line per run:

    .venv/bin/python bench/first_minutes.py                 # cold, then warm (goals: <= 45 s, <= 15 s)
    .venv/bin/python bench/first_minutes.py --pip           # the same with pip
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_run(cache: Path, pip: bool, keep: bool) -> tuple[float, int, str]:
    """(seconds, exit status, last lines) of `make run` in a fresh clone with this cache folder."""
    clone = Path(tempfile.mkdtemp(prefix="first-minutes-"))
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECLOUD_", "VIRTUAL_ENV", "PADDLE_"))}
    env |= {"XDG_CACHE_HOME": str(cache), "PADDLECLOUD_PORT": str(free_port())}
    env.pop("UV_CACHE_DIR", None)
    env.pop("PIP_CACHE_DIR", None)
    if pip:
        env["PADDLECLOUD_NO_UV"] = "1"
    started = time.monotonic()
    result = subprocess.run(["make", "run"], cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - started
    subprocess.run(["make", "stop"], cwd=clone, env=env, capture_output=True, timeout=120)
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-6:])
    if not keep:
        shutil.rmtree(clone, ignore_errors=True)
    return seconds, result.returncode, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pip", action="store_true", help="install with pip, not uv (PADDLECLOUD_NO_UV=1)")
    parser.add_argument("--keep", action="store_true", help="keep the clones and caches (paths printed)")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="first-minutes-cache-"))
    installer = "pip" if args.pip else "uv"
    for label in ("cold", "warm"):
        seconds, status, tail = make_run(cache, args.pip, args.keep)
        print(f"make run, {label} caches, {installer}: {seconds:.1f} s, exit {status}", flush=True)
        if status != 0:
            print(tail)
            break
    if args.keep:
        print(f"cache: {cache}")
    else:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
