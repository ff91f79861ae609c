"""The storage quota's measure of a home with many files: the fast measure against the listing walk it replaced.

    .venv/bin/python bench/quota_walk.py                 # 300,000 and 1,000,000 empty files, 1,000 per folder
    .venv/bin/python bench/quota_walk.py --files 300000 --rounds 3 --dir /mnt/scratch

It makes the files once per size in a temporary folder (the page cache then holds their inodes: warm, as a
home measured every 5 s is), then times `PfsStorage.measure` (storage/measure.py, what
jobs.follow.storage_quota runs) and `PfsStorage.walk` summing sizes (what it ran before), alternating.
Goal: <= 2 s at 1,000,000 files (the quota walk's budget is 5 s). For the floor of any walk it also times GNU
`du -s` over the same files (one lstat per entry in C): below it only a filesystem's own count (project quotas)
goes. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")  # the storage backend is Django's FileSystemStorage
django.setup()

from storage.backends import PfsStorage  # noqa: E402


def make(home: Path, files: int) -> None:
    for start in range(0, files, 1000):
        folder = home / f"{start // 1000:05d}"
        folder.mkdir(parents=True)
        for index in range(min(1000, files - start)):
            os.close(os.open(folder / str(index), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[300_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to make the files (default: the system's temp folder)")
    args = parser.parse_args()
    for files in args.files:
        root = Path(tempfile.mkdtemp(prefix="paddlecloud-quota-walk-", dir=args.dir))
        try:
            began = time.perf_counter()
            make(root / "home" / "u", files)
            made = time.perf_counter() - began
            storage = PfsStorage(str(root))
            fast, listing, floor = [], [], []
            for _ in range(args.rounds):
                began = time.perf_counter()  # the floor: GNU du's C walk makes the same lstat per entry
                subprocess.run(["du", "-s", "--apparent-size", "-B1", str(root / "home" / "u")], check=True,
                               stdout=subprocess.DEVNULL)
                floor.append(time.perf_counter() - began)
                began = time.perf_counter()
                tally = storage.measure("home/u", files + 10_000, 600.0)
                fast.append(time.perf_counter() - began)
                began = time.perf_counter()
                listed = sum(1 for _ in storage.walk("home/u"))
                listing.append(time.perf_counter() - began)
                assert tally.complete and tally.files == listed == files + files // 1000 + (files % 1000 > 0)
            print(
                f"{files:>9,} files (made in {made:.0f} s): measure median {statistics.median(fast):.2f} s "
                f"(best {min(fast):.2f}), listing walk median {statistics.median(listing):.2f} s "
                f"(best {min(listing):.2f}); {statistics.median(listing) / statistics.median(fast):.1f}x; "
                f"`du -s` (C, the same lstat per entry) median {statistics.median(floor):.2f} s"
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
