"""A local worker's log held by the engine: log.txt and log.times opened outside the job, written by its supervisor.

The launcher writes its log to stdout only (PADDLECLOUD_LOG_WRITER=engine); the supervisor, a process
of the worker's host outside the sandbox, writes that pipe to log.txt under the datacenter's limit
(processes.EngineLog). The sandbox binds both files read-only over the job's own output folder from
descriptors (sandbox.Sandbox.sealed), so no process of the job can write them, move them or open them
for writing by another name: the log cap holds whatever the job does. Both files are created here, by
the worker's uid, so the job's uid never owns them either.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass

from paddlecloud.contract.layout import LOG_NAME
from paddlecloud.contract.logtimes import TIMES_NAME

from jobs.engines.local.processes import EngineLog
from jobs.files.logfiles import open_log_fd
from jobs.models import Job


@dataclass(frozen=True)
class HeldLog:
    log: EngineLog
    readonly: tuple[int, int]  # log.txt's and log.times's descriptors for the sandbox's read-only binds

    def sealed(self, folder_inside: str) -> tuple[tuple[int, str], ...]:
        """The sandbox's binds of both files at the worker's folder as the job sees it."""
        log_fd, times_fd = self.readonly
        return ((log_fd, f"{folder_inside}/{LOG_NAME}"), (times_fd, f"{folder_inside}/{TIMES_NAME}"))

    def close(self) -> None:
        for fd in (self.log.fd, self.log.times_fd, *self.readonly):
            with contextlib.suppress(OSError):
                os.close(fd)


def hold(job: Job, worker: str, limit: int | None) -> HeldLog:
    """Open (creating) worker's log.txt and log.times beneath its owner's home, never through a link the job
    planted (logfiles.open_log_fd); a file with a second name (a hard link) is refused, as the supervisor
    would write through it to wherever that name is."""
    opened: list[int] = []
    try:
        for name, flags in ((LOG_NAME, os.O_RDWR), (TIMES_NAME, os.O_RDWR | os.O_APPEND)):
            fd = open_log_fd(job, worker, flags | os.O_CREAT, name)
            opened.append(fd)
            if os.fstat(fd).st_nlink != 1:
                raise OSError(errno.EMLINK, f"{name} has another name (a hard link); the portal will not write it")
        for fd in opened[:2]:
            # A second open file of the same inode, read-only: what bwrap binds (it closes its copy).
            opened.append(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC))
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    log_fd, times_fd, log_readonly, times_readonly = opened
    return HeldLog(EngineLog(log_fd, times_fd, limit), (log_readonly, times_readonly))
