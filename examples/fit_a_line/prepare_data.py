"""Generate a synthetic UCI-housing-like dataset and shard it into data/ for cluster_files_reader.

13 features uniform in [0, 1), target = x . w + b + gaussian noise (sigma 0.1), with fixed w, b.
The output is deterministic (fixed seed) and every shard is written atomically, and the READY
marker is written last: when several trainers of one job find no data and all run this at once,
they write identical files and none of them reads a half-written set. Run it by hand
(``python prepare_data.py``) to pre-generate the data before submitting; train.py runs it if
data/READY is missing.
"""

from __future__ import annotations

import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from paddlecloud.runtime.dataset import split

FEATURES = 13
ROWS = 4096
SHARD_ROWS = 512  # 8 shard files: trainer i reads files i, i+N, ... (cluster_files_reader)
TRUE_W = [5.0 * (-1 + 2 * i / (FEATURES - 1)) for i in range(FEATURES)]
TRUE_B = 2.0
DATA_DIR = Path(__file__).resolve().parent / "data"


def samples() -> Iterator[tuple[list[float], float]]:
    rng = random.Random(2026)
    for _ in range(ROWS):
        x = [rng.random() for _ in range(FEATURES)]
        y = sum(w * v for w, v in zip(TRUE_W, x, strict=True)) + TRUE_B + rng.gauss(0.0, 0.1)
        yield x, y


def prepare(data_dir: Path = DATA_DIR) -> str:
    """Make sure the shards exist; return the glob pattern that matches them."""
    pattern = str(data_dir / "housing-train-*.pickle")
    marker = data_dir / "READY"
    if marker.exists():
        return pattern
    split(samples, SHARD_ROWS, suffix=str(data_dir / "housing-train-%05d.pickle"))
    tmp = data_dir / f".READY.tmp-{uuid.uuid4().hex}"  # not the pid: pods share pids
    tmp.write_text(f"{ROWS} rows in shards of {SHARD_ROWS}\n")
    tmp.replace(marker)
    return pattern


if __name__ == "__main__":
    print(prepare(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR))
