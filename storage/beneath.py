"""Paths a job can change, opened beneath a directory descriptor with O_NOFOLLOW at every step.

The one rule for touching a user's tree: start from a descriptor (the storage root, or a user's home),
open each component relative to the one before without following a link, and open a file only
after its descriptor says it is a regular file. A symlink swapped in at any moment is refused, never
followed (what openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS gives, by a walk Python can do). Deep
trees are walked without recursion and with a bounded number of descriptors open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Descriptors a deep walk keeps open; deeper ancestors are closed and opened again on the way back up.
OPEN_WINDOW = 64

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISSOCK, "a unix socket"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(OSError):
    """The entry is a socket, FIFO, device or link where a regular file was wanted; `what` says which."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(errno.EINVAL, f"is {what}, not a regular file", name)
        self.what = what


def describe(mode: int) -> str:
    """'a unix socket', 'a FIFO (named pipe)', ...: what an entry is, for a message."""
    for test, what in _KINDS:
        if test(mode):
            return what
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def open_dir(name: str, parent: int) -> int:
    """Open a directory entry without following it; a symlink is ELOOP (Linux says ENOTDIR)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "is a symlink; not followed", name) from None
        raise


def open_dir_beneath(top: int, parts: Sequence[str]) -> int:
    """A new descriptor of directory top/parts, each component opened without following a link."""
    fd = os.dup(top)
    try:
        for part in parts:
            child = open_dir(part, fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _probe(parent: int, name: str, creating: bool) -> os.stat_result | None:
    """What `name` is, seen through an O_PATH descriptor (which opens nothing); None if missing and creating.

    Refuses what is not a regular file: a directory (EISDIR), a link (ELOOP), anything else (NotRegularFile).
    """
    try:
        probe = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        if creating:
            return None
        raise
    try:
        st = os.fstat(probe)
    finally:
        os.close(probe)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "is a symlink; not followed", name)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(name, describe(st.st_mode))
    return st


def open_regular(parent: int, name: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """Open `name` in `parent` as a regular file, never following it nor opening a FIFO, socket or device.

    It is first looked at through O_PATH (no FIFO waits, no device driver runs) to see what it is; then
    opened for real, non-blocking, and checked to be that same file, in case it was swapped between.
    With O_CREAT a missing file is created.
    """
    expected = _probe(parent, name, creating=bool(flags & os.O_CREAT))
    swapped = "something else now (it was replaced while being opened)"
    safe = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, safe, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.ELOOP, errno.EISDIR):
            raise NotRegularFile(name, swapped) from None
        raise
    opened = os.fstat(fd)
    same = expected is None or (opened.st_dev, opened.st_ino) == (expected.st_dev, expected.st_ino)
    if not (stat.S_ISREG(opened.st_mode) and same):
        os.close(fd)
        raise NotRegularFile(name, swapped)
    if not flags & os.O_NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def open_file_beneath(top: int, parts: Sequence[str], flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """open_regular of top/parts: the folders and the file itself never followed when they are links."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", "")
    parent = open_dir_beneath(top, parts[:-1])
    try:
        return open_regular(parent, parts[-1], flags, mode)
    finally:
        os.close(parent)


class Descent:
    """The directories from a top descriptor down to the current one, at most OPEN_WINDOW of them open.

    Depth costs names, not descriptors: an ancestor closed to stay in the window is opened again from
    the nearest open one below the top when the walk climbs back to it.
    """

    def __init__(self, top: int) -> None:
        self.names: list[str] = []
        self.fds: list[int | None] = [os.dup(top)]

    @property
    def depth(self) -> int:
        return len(self.names)

    def current(self) -> int:
        return self._fd(len(self.fds) - 1)

    def parent(self) -> int:
        return self._fd(len(self.fds) - 2)

    def enter(self, name: str) -> None:
        """Open child directory `name` of the current one (ELOOP for a link) and make it current."""
        child = open_dir(name, self.current())
        self.names.append(name)
        self.fds.append(child)
        evict = len(self.fds) - 1 - OPEN_WINDOW
        if evict > 0 and self.fds[evict] is not None:
            os.close(self.fds[evict])  # type: ignore[arg-type]
            self.fds[evict] = None

    def leave(self) -> str:
        """Close the current directory and go back to its parent; returns the left directory's name."""
        fd = self.fds.pop()
        if fd is not None:
            os.close(fd)
        return self.names.pop()

    def close(self) -> None:
        for fd in self.fds:
            if fd is not None:
                os.close(fd)
        self.fds.clear()
        self.names.clear()

    def _fd(self, level: int) -> int:
        fd = self.fds[level]
        if fd is not None:
            return fd
        known = max(index for index in range(level) if self.fds[index] is not None)
        for index in range(known + 1, level + 1):
            self.fds[index] = open_dir(self.names[index - 1], self._fd(index - 1))
        reopened = self.fds[level]
        assert reopened is not None
        return reopened


def remove_tree(parent: int, name: str, removed: Callable[[str, os.stat_result], None]) -> None:
    """rm -r of `name` in `parent` without recursion; removed(name, stat) for each entry as it goes.

    Links are removed, never entered; an entry that vanished meanwhile is skipped.
    """
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)
        removed(name, st)
        return
    descent = Descent(parent)
    try:
        descent.enter(name)
        pending: list[list[str]] = [_names(descent.current())]
        tops: list[os.stat_result] = [st]
        while pending:
            if not pending[-1]:
                pending.pop()
                left = descent.leave()
                os.rmdir(left, dir_fd=descent.current())
                removed(left, tops.pop())
                continue
            child = pending[-1].pop()
            try:
                child_st = os.stat(child, dir_fd=descent.current(), follow_symlinks=False)
                if stat.S_ISDIR(child_st.st_mode) and _entered(descent, child):
                    pending.append(_names(descent.current()))
                    tops.append(child_st)
                    continue
                os.unlink(child, dir_fd=descent.current())
            except FileNotFoundError:
                continue
            removed(child, child_st)
    finally:
        descent.close()


def _entered(descent: Descent, name: str) -> bool:
    """Enter directory `name`; False when it became a link or a file since it was looked at (unlink it)."""
    try:
        descent.enter(name)
    except NotADirectoryError:
        return False
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return False
    return True


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as found:
        return sorted((item.name for item in found), reverse=True)
