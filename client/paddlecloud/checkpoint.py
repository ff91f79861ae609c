"""Checkpoints in the job's output folder: save one atomically, find the latest, and resume after a preemption.

A preempted job's workers get SIGTERM, then SIGKILL after the datacenter's grace (30 s by default); the job
then waits in the queue and runs again in the same output folder, with ``PADDLECLOUD_ATTEMPT`` one higher and
``PADDLECLOUD_PREEMPTED=1``. What it saved here is what it resumes from::

    from paddlecloud import checkpoint

    last = checkpoint.latest()                      # None on a first run
    start = last.step + 1 if last else 0
    for step in range(start, steps):
        train_one(step)
        if step % 100 == 0 or checkpoint.stop_requested():
            checkpoint.save(step, lambda folder: paddle.save(model.state_dict(), str(folder / "model.pdparams")))
        if checkpoint.stop_requested():
            break                                   # preempted: saved, leave before the SIGKILL

A checkpoint is a folder ``<output>/checkpoints/step-<n>``: ``save`` fills a hidden temporary folder, syncs it
to disk and renames it into place, so ``latest`` never sees half a checkpoint, even after a SIGKILL mid-save.
In a job of several trainers, let one of them (trainer 0) save.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^step-(\d{1,12})$")
_stop = threading.Event()
_installed = False


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path  # the folder the writer filled


def directory(output: str | os.PathLike[str] | None = None) -> Path:
    """Where checkpoints live: ``<output>/checkpoints``; the job's output folder by default (else ./checkpoints)."""
    base = Path(output if output is not None else os.environ.get("PADDLECLOUD_OUTPUT_DIR", "."))
    return base / "checkpoints"


def attempt() -> int:
    """This run of the job: 1, then one more after each preemption."""
    try:
        return max(int(os.environ.get("PADDLECLOUD_ATTEMPT", "1")), 1)
    except ValueError:
        return 1


def resumed() -> bool:
    """True in a run that follows a preemption (an earlier attempt may have left checkpoints)."""
    return os.environ.get("PADDLECLOUD_PREEMPTED") == "1"


def latest(output: str | os.PathLike[str] | None = None) -> Checkpoint | None:
    """The complete checkpoint with the highest step, or None."""
    found = [
        Checkpoint(int(match.group(1)), entry)
        for entry in _entries(directory(output))
        if (match := _NAME.match(entry.name)) and entry.is_dir() and not entry.is_symlink()
    ]
    return max(found, key=lambda c: c.step, default=None)


def save(
    step: int, write: Callable[[Path], object], keep: int = 2, output: str | os.PathLike[str] | None = None
) -> Checkpoint:
    """Call ``write(folder)`` to fill an empty folder, then make it checkpoint ``step``; keep the newest ``keep``."""
    if step < 0 or keep < 1:
        raise ValueError("step must be >= 0 and keep >= 1")
    root = directory(output)
    root.mkdir(parents=True, exist_ok=True)
    temporary = root / f".step-{step}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    write(temporary)
    _sync_tree(temporary)
    final = root / f"step-{step}"
    if final.exists():  # the same step saved again (a rerun): the new one wins
        shutil.rmtree(final)
    temporary.rename(final)
    _sync(root)
    _prune(root, keep)
    return Checkpoint(step, final)


def stop_requested() -> bool:
    """True once this process got SIGTERM (a preemption or a kill): save, then leave.

    The first call (from the main thread) installs the SIGTERM handler that sets it: from then on SIGTERM
    no longer ends the process by itself, the training loop does.
    """
    global _installed  # one handler per process
    if not _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: _stop.set())
        _installed = True
    return _stop.is_set()


def _entries(root: Path) -> list[Path]:
    try:
        return list(root.iterdir())
    except OSError:
        return []


def _prune(root: Path, keep: int) -> None:
    complete = sorted(
        (int(m.group(1)), entry) for entry in _entries(root) if (m := _NAME.match(entry.name)) and entry.is_dir()
    )
    for _, entry in complete[:-keep]:
        shutil.rmtree(entry, ignore_errors=True)
    for entry in _entries(root):  # what a process killed mid-save left
        if entry.name.startswith(".step-") and ".tmp-" in entry.name and not entry.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(entry, ignore_errors=True)


def _sync_tree(folder: Path) -> None:
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync(Path(dirpath))


def _sync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
