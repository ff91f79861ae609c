"""The embedded broker writes each message whole: a reader never sees a half-written file."""

from __future__ import annotations

import json
from pathlib import Path

from kombu import Connection


def test_messages_go_through_the_embedded_broker_and_no_partial_file_is_visible(tmp_path: Path) -> None:
    queue_dir = tmp_path / "queue"
    queue_dir.mkdir()
    options = {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir),
               "control_folder": str(tmp_path / "control")}
    with Connection("pcfs://", transport_options=options) as connection:
        queue = connection.SimpleQueue("q")
        queue.put({"n": 1})
        files = list(queue_dir.iterdir())
        # Only finished messages carry the ".msg" name a reader looks for; nothing temporary is left.
        assert [f.name.endswith(".q.msg") for f in files] == [True]
        assert json.loads(files[0].read_text())
        assert queue.get(timeout=2).payload == {"n": 1}
        queue.close()
