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

With Paddle, one call saves and restores a model, its optimizer and the step (``save_paddle``, ``load_paddle``);
``save(..., metric=loss, keep_best=1)`` also keeps the best checkpoint by that metric beside the newest, and the
portal lists each job's checkpoints with their step, time, size and metric (``paddlectl get checkpoints JOB``).
A job submitted with ``-resume-from JOB[:STEP]`` finds that run's checkpoint here as its own latest.
The SIGTERM handler is installed by the first use of this module (any of its functions) in the main thread.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecloud.contract.keeping import GOALS, kept_steps
from paddlecloud.contract.layout import CHECKPOINT_META, CHECKPOINTS_NAME

_NAME = re.compile(r"^step-(\d{1,12})$")
_stop = threading.Event()
_installed = False


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path  # the folder the writer filled
    metric: float | None = None  # the value `save` was given at this step, if any


def directory(output: str | os.PathLike[str] | None = None) -> Path:
    """Where checkpoints live: ``<output>/checkpoints``; the job's output folder by default (else ./checkpoints)."""
    base = Path(output if output is not None else os.environ.get("PADDLECLOUD_OUTPUT_DIR", "."))
    return base / CHECKPOINTS_NAME


def attempt() -> int:
    """This run of the job: 1, then one more after each preemption."""
    try:
        return max(int(os.environ.get("PADDLECLOUD_ATTEMPT", "1")), 1)
    except ValueError:
        return 1


def resumed() -> bool:
    """True in a run that follows a preemption (an earlier attempt may have left checkpoints)."""
    return os.environ.get("PADDLECLOUD_PREEMPTED") == "1"


def _metric_of(folder: Path) -> float | None:
    try:
        value = json.loads((folder / CHECKPOINT_META).read_text()).get("metric")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def list_all(output: str | os.PathLike[str] | None = None) -> list[Checkpoint]:
    """Every complete checkpoint, by step."""
    _install()
    found = [
        Checkpoint(int(match.group(1)), entry, _metric_of(entry))
        for entry in _entries(directory(output))
        if (match := _NAME.match(entry.name)) and entry.is_dir() and not entry.is_symlink()
    ]
    return sorted(found, key=lambda c: c.step)


def latest(output: str | os.PathLike[str] | None = None) -> Checkpoint | None:
    """The complete checkpoint with the highest step, or None. In the job's own output folder (`output` None)
    with none saved yet, the checkpoint it was told to start from (PADDLECLOUD_RESUME_FROM), if any."""
    found = list_all(output)
    if found:
        return found[-1]
    return _resume_from() if output is None else None


def _resume_from() -> Checkpoint | None:
    """Another run's checkpoint this job starts from (`-resume-from`): read from where it lies, never written."""
    folder = Path(os.environ.get("PADDLECLOUD_RESUME_FROM") or "/nonexistent")
    match = _NAME.match(folder.name)
    if match is None or not folder.is_dir():
        return None
    return Checkpoint(int(match.group(1)), folder, _metric_of(folder))


def load(step: int | None = None, output: str | os.PathLike[str] | None = None) -> Checkpoint | None:
    """Checkpoint `step` (the latest when None), or None where there is none: read your files from its `path`."""
    if step is None:
        return latest(output)
    found = next((c for c in list_all(output) if c.step == step), None)
    if found is None and output is None and (resumed := _resume_from()) is not None and resumed.step == step:
        return resumed
    return found


def save(
    step: int,
    write: Callable[[Path], object],
    keep: int = 2,
    output: str | os.PathLike[str] | None = None,
    metric: float | None = None,
    keep_best: int = 0,
    goal: str = "minimize",
) -> Checkpoint:
    """Call ``write(folder)`` to fill an empty folder, then make it checkpoint ``step``. Keeps the newest ``keep``
    and, with ``keep_best``, also the best ``keep_best`` by ``metric`` (the value at this step; ``goal``
    minimize or maximize); the others are deleted once this one is complete."""
    if step < 0 or keep < 1 or keep_best < 0:
        raise ValueError("step must be >= 0, keep >= 1 and keep_best >= 0")
    if goal not in GOALS:
        raise ValueError(f"goal must be one of {', '.join(GOALS)}")
    if metric is not None and not (isinstance(metric, int | float) and math.isfinite(metric)):
        raise ValueError("metric must be a finite number")
    _install()
    root = directory(output)
    root.mkdir(parents=True, exist_ok=True)
    temporary = root / f".step-{step}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    write(temporary)
    meta: dict[str, Any] = {"step": step, "time": time.time(), "metric": None if metric is None else float(metric)}
    (temporary / CHECKPOINT_META).write_text(json.dumps(meta))
    _sync_tree(temporary)
    final = root / f"step-{step}"
    if final.exists():  # the same step saved again (a rerun): the new one wins
        shutil.rmtree(final)
    temporary.rename(final)
    _sync(root)
    _prune(root, keep, keep_best, goal)
    return Checkpoint(step, final, None if metric is None else float(metric))


def save_paddle(step: int, model: Any, optimizer: Any = None, **options: Any) -> Checkpoint:
    """Save a Paddle model's and optimizer's state dicts (model.pdparams, optimizer.pdopt) as checkpoint ``step``
    in one call; ``options`` are ``save``'s (keep, metric, keep_best, goal, output)."""
    import paddle  # noqa: PLC0415 - only a job that trains with Paddle imports it

    def write(folder: Path) -> None:
        paddle.save(model.state_dict(), str(folder / "model.pdparams"))
        if optimizer is not None:
            paddle.save(optimizer.state_dict(), str(folder / "optimizer.pdopt"))

    return save(step, write, **options)


def load_paddle(
    model: Any, optimizer: Any = None, step: int | None = None, output: str | os.PathLike[str] | None = None
) -> int | None:
    """Restore the model (and optimizer) from checkpoint ``step`` (the latest when None); returns its step, or None
    where there is none (a first run: start from step 0)."""
    import paddle  # noqa: PLC0415

    found = load(step, output)
    if found is None:
        return None
    model.set_state_dict(paddle.load(str(found.path / "model.pdparams")))
    if optimizer is not None and (found.path / "optimizer.pdopt").exists():
        optimizer.set_state_dict(paddle.load(str(found.path / "optimizer.pdopt")))
    return found.step


def _install() -> None:
    """Install the SIGTERM handler once, from the main thread: from then on SIGTERM no longer ends the process by
    itself, the training loop does (stop_requested)."""
    global _installed  # one handler per process
    if not _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: _stop.set())
        _installed = True


def stop_requested() -> bool:
    """True once this process got SIGTERM (a preemption or a kill): save, then leave. The handler that sets it
    is installed by the first use of this module."""
    _install()
    return _stop.is_set()


def _entries(root: Path) -> list[Path]:
    try:
        return list(root.iterdir())
    except OSError:
        return []


def _prune(root: Path, keep: int, keep_best: int = 0, goal: str = "minimize") -> None:
    complete = [c for c in list_all(root.parent) if c.path.parent == root]
    kept = kept_steps(((c.step, c.metric) for c in complete), keep_best, keep, goal)  # the portal's rule too
    for found in complete:
        if found.step not in kept:
            shutil.rmtree(found.path, ignore_errors=True)
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
