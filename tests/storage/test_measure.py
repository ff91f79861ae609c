"""The quota's fast measure (storage/measure.py) sums exactly what the listing walk lists, however the tree looks."""

from __future__ import annotations

import os
from pathlib import Path

from storage import beneath
from storage.backends import TEMP_PREFIX, PfsStorage
from storage.measure import measure_tree


def _tree(root: Path) -> None:
    home = root / "home" / "alice"
    deep = home / "/".join(f"d{level}" for level in range(beneath.OPEN_WINDOW + 20))  # past the descriptor window
    deep.mkdir(parents=True)
    (deep / "bottom.bin").write_bytes(b"b" * 12345)
    for index in range(300):
        (home / "many").mkdir(exist_ok=True)
        (home / "many" / f"{index}.txt").write_bytes(b"x" * index)
    outside = root / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"o" * 100_000)
    (home / "link-to-outside").symlink_to(outside)  # listed, counted 0, never entered
    (home / "link-to-file").symlink_to(outside / "big.bin")
    (home / f"{TEMP_PREFIX}upload").write_bytes(b"t" * 999)  # an upload in progress: the upload's quota counts it
    os.mkfifo(home / "pipe")


def test_the_measure_sums_what_the_listing_walk_lists(tmp_path: Path) -> None:
    _tree(tmp_path)
    storage = PfsStorage(str(tmp_path))
    listed = list(storage.walk("home/alice"))
    tally = storage.measure("home/alice", 1_000_000, 30.0)
    assert tally.complete
    assert (tally.bytes, tally.files) == (sum(entry.size for entry in listed), len(listed))
    assert tally.bytes == 12345 + sum(range(300))  # nothing behind the links, no temp upload
    assert tally.preallocated == sum(entry.preallocated for entry in listed)


def test_the_measure_stops_at_its_entry_bound_and_says_so(tmp_path: Path) -> None:
    _tree(tmp_path)
    tally = PfsStorage(str(tmp_path)).measure("home/alice", 50, 30.0)
    assert not tally.complete and tally.files == 50


def test_the_measure_stops_at_its_time_bound_and_says_so(tmp_path: Path) -> None:
    _tree(tmp_path)
    top = os.open(tmp_path / "home" / "alice", os.O_RDONLY | os.O_DIRECTORY)
    try:
        tally = measure_tree(top, TEMP_PREFIX, 1_000_000, 0.0)
    finally:
        os.close(top)
    assert not tally.complete
