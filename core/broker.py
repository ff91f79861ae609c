"""The embedded broker: kombu's filesystem transport, with messages that appear whole.

kombu writes a message file in place, so a worker listing the folder at that moment can read an
empty file and die on the JSON (seen in our tests). Here each message is written to a hidden
temporary name first and renamed into the queue: a reader sees it complete or not at all.
Registered as the `pcfs://` broker URL in portal/celery.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu passes **kwargs
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = str(Path(self.data_folder_out) / name)
        # A name starting with "." never matches "<queue>.msg", so readers skip it while it is written.
        temporary = Path(self.data_folder_out) / f".{uuid.uuid4()}.tmp"
        try:
            with temporary.open("wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            temporary.replace(final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
    driver_type = "filesystem"
    driver_name = "pcfs"
