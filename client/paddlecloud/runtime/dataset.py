"""Dataset tools: shard a reader into files and read back one trainer's share (stdlib only).

A *reader* is what PaddlePaddle's v2 API called a reader creator: a no-argument callable that
returns a fresh iterator over records. Every shard file is written atomically (temp name, then
rename), so two trainers preparing the same data at once never read a half-written shard.
"""

from __future__ import annotations

import glob
import os
import pickle
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from paddlecloud.runtime import recordio

Reader = Callable[[], Iterable[Any]]
Dumper = Callable[[Any, IO[bytes]], Any]
Loader = Callable[[IO[bytes]], Any]


def _unique() -> str:
    """A temp-name tag no other writer shares: trainers in pods on one PFS all have pid 13 or so."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def trainer_id() -> int:
    """This trainer's index: PADDLE_TRAINER_ID, else TRAINER_ID (both set by the launcher), else 0."""
    return int(os.environ.get("PADDLE_TRAINER_ID") or os.environ.get("TRAINER_ID") or 0)


def trainers() -> int:
    """Number of trainers: PADDLE_TRAINERS_NUM, else TRAINERS, else 1."""
    return int(os.environ.get("PADDLE_TRAINERS_NUM") or os.environ.get("TRAINERS") or 1)


def _chunks(reader: Reader, line_count: int) -> Iterator[list[Any]]:
    if line_count < 1:
        raise ValueError(f"line_count must be >= 1, got {line_count}")
    chunk: list[Any] = []
    for record in reader():
        chunk.append(record)
        if len(chunk) == line_count:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _atomic_dump(path: Path, obj: Any, dumper: Dumper) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{_unique()}")
    try:
        with tmp.open("wb") as f:
            dumper(obj, f)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def split(reader: Reader, line_count: int, suffix: str = "./%05d.pickle", dumper: Dumper = pickle.dump) -> list[str]:
    """Write the reader's records into files of ``line_count`` records each (the last may hold
    fewer). File ``i`` is named ``suffix % i`` and holds one list, written as ``dumper(list, f)``.
    Returns the file names in order.
    """
    if not callable(dumper):
        raise TypeError("dumper should be callable")
    names = []
    for i, chunk in enumerate(_chunks(reader, line_count)):
        name = suffix % i
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        _atomic_dump(Path(name), chunk, dumper)
        names.append(name)
    return names


def convert(output_path: str, reader: Reader, line_count: int, name_prefix: str) -> list[str]:
    """Write the reader's records as RecordIO shards of ``line_count`` pickled records each, named
    ``<output_path>/<name_prefix>-00000-of-00009`` (the total is known only at the end, so shards
    are renamed once all are written). Returns the shard paths in order.
    """
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    tmp_names: list[Path] = []
    try:
        for i, chunk in enumerate(_chunks(reader, line_count)):
            tmp = out / f".{name_prefix}-{i:05d}.partial-{_unique()}"
            with recordio.Writer(tmp) as w:
                for record in chunk:
                    w.write(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
            tmp_names.append(tmp)
    except BaseException:
        for t in tmp_names:
            t.unlink(missing_ok=True)
        raise
    total = len(tmp_names)
    final = [out / f"{name_prefix}-{i:05d}-of-{total:05d}" for i in range(total)]
    for tmp, name in zip(tmp_names, final, strict=True):
        tmp.replace(name)
    return [str(p) for p in final]


def _load_records(path: str, loader: Loader) -> Iterator[Any]:
    if recordio.is_recordio(path):
        for payload in recordio.read(path):
            # Pickle is the documented record format of these tools: read only data you trust.
            yield pickle.loads(payload)  # noqa: S301
        return
    with Path(path).open("rb") as f:
        yield from loader(f)


def _check_share(trainer_count: int, trainer_id: int) -> None:
    if trainer_count < 1:
        raise ValueError(f"trainer count must be >= 1, got {trainer_count}")
    if not 0 <= trainer_id < trainer_count:
        raise ValueError(f"trainer id {trainer_id} is out of range for {trainer_count} trainer(s)")


def cluster_files_reader(
    files_pattern: str, trainer_count: int, trainer_id: int, loader: Loader = pickle.load
) -> Reader:
    """A reader over this trainer's files: the files matching ``files_pattern``, sorted, file ``i``
    going to trainer ``i % trainer_count``. Each file is read with ``loader(f)`` (a list of records,
    as ``split`` writes), or record by record if it is a RecordIO shard from ``convert``.
    """
    _check_share(trainer_count, trainer_id)

    def reader() -> Iterator[Any]:
        # glob.glob, not Path.glob: it takes absolute patterns and skips dot-files (our half-written shards).
        files = sorted(glob.glob(files_pattern))  # noqa: PTH207
        for path in files[trainer_id::trainer_count]:
            yield from _load_records(path, loader)

    return reader


def dist_reader(filename: str, trainers: int, trainer_id: int, loader: Loader = pickle.load) -> Reader:
    """A reader over this trainer's share of the records in ``filename``: record ``i`` goes to
    trainer ``i % trainers``. ``filename`` may be a glob (e.g. all shards of one ``convert``
    output): the matching files are read in sorted order as one stream of records.
    """
    _check_share(trainers, trainer_id)

    def reader() -> Iterator[Any]:
        # glob.glob for the same reasons as in cluster_files_reader.
        files = sorted(glob.glob(filename)) if any(c in filename for c in "*?[") else [filename]  # noqa: PTH207
        i = 0
        for path in files:
            for record in _load_records(path, loader):
                if i % trainers == trainer_id:
                    yield record
                i += 1

    return reader
