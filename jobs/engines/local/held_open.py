"""Bytes a user's local jobs hold in files they deleted but keep open: the storage quota counts them too.

A job can write 300 MiB, delete the file and keep a descriptor: the walk of the home no longer sees it, the
disk still holds it, and the quota showed 73 KB (issue 34). The control worker (root, as it runs sandboxed
jobs) reads the open descriptors of every process of the user's job uid (world.job_ids: one uid per user):
each regular file with no links left, on the home's filesystem, counts once by its size. Bounded: at most
MAX_DESCRIPTORS descriptors and SECONDS per look (then what was found is a lower bound).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil

MAX_DESCRIPTORS = 200_000
SECONDS = 1.0


def held_open_bytes(job_uid: int, home: Path) -> int:
    """What the processes of `job_uid` hold open in deleted files on `home`'s filesystem; 0 where none (or
    where this worker cannot read other uids' descriptors: it is not root, and the jobs run as its uid)."""
    if os.geteuid() != 0:
        return 0
    try:
        device = home.stat().st_dev
    except OSError:
        return 0
    deadline, looked = time.monotonic() + SECONDS, 0
    held: dict[int, int] = {}  # inode -> size: a file open twice (or in two processes) counts once
    for process in psutil.process_iter(["uids"]):
        uids = process.info["uids"]
        if uids is None or uids.real != job_uid:
            continue
        try:
            descriptors = list(Path(f"/proc/{process.pid}/fd").iterdir())
        except OSError:
            continue  # ended meanwhile
        for descriptor in descriptors:
            looked += 1
            if looked > MAX_DESCRIPTORS or time.monotonic() > deadline:
                return sum(held.values())
            try:
                found = descriptor.stat()  # the open file itself, wherever it was
            except OSError:
                continue
            if stat.S_ISREG(found.st_mode) and found.st_nlink == 0 and found.st_dev == device:
                held[found.st_ino] = found.st_size
    return sum(held.values())
