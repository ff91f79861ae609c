"""Server-side log search (jobs/follow/log_search.py) of a large log: time to the first match, and to the end.

    .venv/bin/python bench/log_search.py                  # a 100 MiB log, 3 rounds
    .venv/bin/python bench/log_search.py --mib 1000 --rounds 1

It writes a log of `--mib` MiB of training-like lines to a temporary folder once, then times the search the
API runs: for a line near the start (the first answer the viewer shows), for a line at the very end (a whole
pass over the file, in as many requests as the per-request bounds take: 512 MiB or 2 s each), and for a word
that is not there. Goal: <= 1 s to the first match of a 100 MiB log. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import django

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")  # the search lives in a Django app
django.setup()

from jobs.follow import log_search, logs  # noqa: E402

LINE = b"[2026-11-29 10:00:00] step %08d loss 0.%06d lr 0.001 throughput 1234.5 samples/s\n"


def write_log(path: Path, mib: int) -> None:
    with path.open("wb") as out:
        out.write(LINE % (0, 1))
        out.write(b"first: the EARLY needle\n")
        step = 0
        while out.tell() < mib << 20:
            out.write(b"".join(LINE % (step + i, (step + i) % 999_999) for i in range(10_000)))
            step += 10_000
        out.write(b"last: the LATE needle\n")


def whole(path: Path, query: str) -> tuple[float, float, int, int]:
    """(seconds to the first answer with a match or the end, seconds to the end, matches, requests)."""
    first, found, requests = None, 0, 0
    start: int | None = 0
    began = time.perf_counter()
    with mock.patch.object(logs, "open_file", lambda job, worker: path.open("rb")):
        while start is not None:
            answer = log_search.search(None, "trainer-0", query, start)  # type: ignore[arg-type]
            assert answer is not None
            requests += 1
            found += len(answer.matches)
            if first is None and (answer.matches or answer.next is None):
                first = time.perf_counter() - began
            start = answer.next
    return first or 0.0, time.perf_counter() - began, found, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paddlecloud-log-search-") as folder:
        path = Path(folder) / "log.txt"
        write_log(path, args.mib)
        size = path.stat().st_size
        lines = size // len(LINE % (0, 0))
        print(f"a {size / (1 << 20):.0f} MiB log ({lines:,} lines), page cache warm after the write")
        for label, query in (("near the start", "early needle"), ("at the end", "late needle"), ("nowhere", "absent")):
            rounds = [whole(path, query) for _ in range(args.rounds)]
            first = statistics.median(r[0] for r in rounds)
            end = statistics.median(r[1] for r in rounds)
            rate = size / end / (1 << 20) if end else 0.0
            print(f"  {label:15s}: first answer {first * 1000:7.1f} ms, whole log {end * 1000:7.1f} ms "
                  f"({rate:.0f} MiB/s), {rounds[0][2]} match(es) in {rounds[0][3]} request(s)")
        print(f"load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
