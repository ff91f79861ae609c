"""Dataset tools: split/convert round trips, RecordIO framing, and per-trainer sharding."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import paddlecloud
import pytest
from paddlecloud.runtime import recordio
from paddlecloud.runtime.dataset import cluster_files_reader, convert, dist_reader, split, trainer_id, trainers

RECORDS = [([float(i), float(i) / 2], i % 7) for i in range(103)]


def reader() -> list[tuple[list[float], int]]:
    return list(RECORDS)


def test_split_writes_numbered_files_of_line_count(tmp_path: Path) -> None:
    names = split(reader, 10, suffix=str(tmp_path / "part-%05d.pickle"))
    assert [Path(n).name for n in names] == [f"part-{i:05d}.pickle" for i in range(11)]
    sizes = [len(pickle.loads(Path(n).read_bytes())) for n in names]  # noqa: S301
    assert sizes == [10] * 10 + [3]
    # no temp files left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(n).name for n in names)


def test_split_exact_multiple_and_custom_dumper(tmp_path: Path) -> None:
    def dump_json(obj: object, f: object) -> None:
        f.write(json.dumps(obj).encode())  # type: ignore[attr-defined]

    names = split(lambda: range(20), 10, suffix=str(tmp_path / "%d.json"), dumper=dump_json)
    assert len(names) == 2
    files = str(tmp_path / "*.json")
    got = list(cluster_files_reader(files, 1, 0, loader=lambda f: json.loads(f.read()))())
    assert got == list(range(20))


def test_split_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="line_count"):
        split(reader, 0, suffix=str(tmp_path / "%d"))
    with pytest.raises(TypeError):
        split(reader, 1, suffix=str(tmp_path / "%d"), dumper="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 11, 12])
def test_cluster_files_reader_covers_every_record_once(tmp_path: Path, count: int) -> None:
    split(reader, 10, suffix=str(tmp_path / "s-%05d.pickle"))
    shares = [list(cluster_files_reader(str(tmp_path / "s-*.pickle"), count, i)()) for i in range(count)]
    flat = [r for share in shares for r in share]
    assert sorted(flat) == sorted(RECORDS)
    # file i goes to trainer i % count: trainer 0 of 2 holds files 0, 2, 4, ...
    if count == 2:
        assert shares[0][:10] == RECORDS[:10] and shares[1][:10] == RECORDS[10:20]


def test_convert_names_and_round_trip(tmp_path: Path) -> None:
    paths = convert(str(tmp_path / "out"), reader, 12, "uci_housing")
    names = [Path(p).name for p in paths]
    assert names == [f"uci_housing-{i:05d}-of-00009" for i in range(9)]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == names
    got = [pickle.loads(b) for p in paths for b in recordio.read(p)]  # noqa: S301
    assert got == RECORDS
    # cluster_files_reader reads RecordIO shards too
    both = [list(cluster_files_reader(str(tmp_path / "out" / "uci_housing-*"), 2, i)()) for i in range(2)]
    assert sorted(both[0] + both[1]) == sorted(RECORDS)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_dist_reader_shares_records_of_one_file(tmp_path: Path, count: int) -> None:
    (path,) = convert(str(tmp_path), reader, 1000, "all")
    shares = [list(dist_reader(path, count, i)()) for i in range(count)]
    assert sorted(r for s in shares for r in s) == sorted(RECORDS)
    assert shares[0][0] == RECORDS[0] and shares[count - 1][0] == RECORDS[count - 1]


def test_dist_reader_on_a_pickle_file_and_on_a_glob(tmp_path: Path) -> None:
    split(reader, 50, suffix=str(tmp_path / "p-%02d.pickle"))
    share = list(dist_reader(str(tmp_path / "p-00.pickle"), 2, 1)())
    assert share == RECORDS[1:50:2]
    shares = [list(dist_reader(str(tmp_path / "p-*.pickle"), 3, i)()) for i in range(3)]
    assert shares[0] == RECORDS[0::3]


def test_bad_share_arguments() -> None:
    with pytest.raises(ValueError, match="out of range"):
        cluster_files_reader("x-*", 2, 2)
    with pytest.raises(ValueError, match=">= 1"):
        dist_reader("x", 0, 0)


def test_recordio_detects_corruption(tmp_path: Path) -> None:
    path = tmp_path / "r"
    with recordio.Writer(path) as w:
        w.write(b"hello")
        w.write(b"")
        w.write(b"world" * 100)
    assert list(recordio.read(path)) == [b"hello", b"", b"world" * 100]
    data = bytearray(path.read_bytes())
    data[8 + 8 + 1] ^= 0xFF  # flip a byte of the first payload
    path.write_bytes(bytes(data))
    with pytest.raises(recordio.RecordIOError, match="checksum"):
        list(recordio.read(path))
    path.write_bytes(bytes(data[:-3]))
    with pytest.raises(recordio.RecordIOError):
        list(recordio.read(path))
    (tmp_path / "not").write_bytes(b"plain text")
    with pytest.raises(recordio.RecordIOError, match="magic"):
        list(recordio.read(tmp_path / "not"))


def test_recordio_writer_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "r"
    with pytest.raises(RuntimeError), recordio.Writer(path) as w:
        w.write(b"x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_trainer_id_and_trainers_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PADDLE_TRAINER_ID", "TRAINER_ID", "PADDLE_TRAINERS_NUM", "TRAINERS"):
        monkeypatch.delenv(name, raising=False)
    assert (trainer_id(), trainers()) == (0, 1)
    monkeypatch.setenv("TRAINER_ID", "3")
    monkeypatch.setenv("TRAINERS", "4")
    assert (trainer_id(), trainers()) == (3, 4)
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    assert (paddlecloud.trainer_id(), paddlecloud.trainers()) == (1, 2)  # package-level re-export


def test_import_paddlecloud_stays_light() -> None:
    code = "import sys, paddlecloud; print(sorted(m for m in sys.modules if m.startswith('paddlecloud')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "['paddlecloud']"
