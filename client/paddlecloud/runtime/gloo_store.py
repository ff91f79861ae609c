"""The gloo HTTP rendezvous store for parameter-server jobs, served by pserver 0's launcher.

Paddle's own pserver 0 would serve it from inside ``fleet.init()`` and block there until every
trainer has finished its rendezvous, so it only starts listening on its PS port afterwards. The
launcher makes trainers wait until every pserver listens before it starts them (paddle-notes trap
3): with Paddle hosting the store that is a deadlock. So the launcher serves the store itself and
runs pservers with ``PADDLE_WITH_GLOO=0`` (pservers never use gloo in HTTP mode; they only host).

The protocol is exactly Paddle's ``paddle.distributed.fleet.utils.http_server.KVHandler``:
``PUT /<scope>/<key>`` stores the body, ``GET`` returns it (404 until set), ``DELETE`` marks the
key done (Paddle uses it to count finished ranks; nothing is removed).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Store(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int) -> None:
        super().__init__(("", port), _Handler)
        self.lock = threading.Lock()
        self.kv: dict[str, dict[str, bytes]] = {}
        self.deleted: dict[str, set[str]] = {}


class _Handler(BaseHTTPRequestHandler):
    server: _Store

    def _key(self) -> tuple[str, str] | None:
        parts = self.path.split("/")
        if len(parts) != 3:
            self._status(400)
            return None
        return parts[1], parts[2]

    def _status(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        key = self._key()
        if key is None:
            return
        with self.server.lock:
            value = self.server.kv.get(key[0], {}).get(key[1])
        if value is None:
            self._status(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(value)))
        self.end_headers()
        self.wfile.write(value)

    def do_PUT(self) -> None:
        key = self._key()
        if key is None:
            return
        value = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.kv.setdefault(key[0], {})[key[1]] = value
        self._status(200)

    def do_DELETE(self) -> None:
        key = self._key()
        if key is None:
            return
        with self.server.lock:
            self.server.deleted.setdefault(key[0], set()).add(key[1])
        self._status(200)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per gloo poll would drown the job log


class GlooStore:
    """A running store; ``close()`` stops it (the launcher keeps it up for the job's life)."""

    def __init__(self, port: int) -> None:
        self._server = _Store(port)  # raises OSError when the port is taken
        self._thread = threading.Thread(target=self._server.serve_forever, name="gloo-store", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
