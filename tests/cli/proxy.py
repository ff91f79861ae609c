"""A TCP proxy in front of the live portal that a test can cut: after N bytes, or all at once.

It stands in for a network that drops (an upload cut half way) or a portal that restarts (the
follower of `logs -f` must carry on): `stop()` closes the listener and every connection,
`start()` listens on the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = 0
        self.sent = bytearray()  # everything the client sent (to count requests)
        self.cut_after: int | None = None  # client bytes after which every connection is cut
        self.received = 0  # bytes the portal sent back
        self.cut_down_after: int | None = None  # portal bytes after which every connection is cut
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Proxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._listener is not None:
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def reset(self) -> None:
        with self._lock:
            self.sent.clear()
            self.received = 0
            self.cut_after = self.cut_down_after = None

    def count(self, marker: bytes) -> int:
        with self._lock:
            return bytes(self.sent).count(marker)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    if from_client:
                        limit, done = self.cut_after, len(self.sent)
                    else:
                        limit, done = self.cut_down_after, self.received
                    cut = limit is not None and done + len(data) > limit
                    if cut:
                        data = data[: max((limit or 0) - done, 0)]
                    if from_client:
                        self.sent += data
                    else:
                        self.received += len(data)
                if cut:
                    if data:
                        sink.sendall(data)
                    threading.Thread(target=self.stop, daemon=True).start()
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
