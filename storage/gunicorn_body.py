"""Chunk bodies read straight from gunicorn's socket (gunicorn internals live only here), else Django's stream."""

from __future__ import annotations

import io
import socket
from typing import Any

from django.http import HttpRequest

from storage.descriptors import Readable

try:  # the WSGI server `make run` and production use; optional for the storage API itself
    from gunicorn.http.body import Body as _GunicornBody
    from gunicorn.http.body import LengthReader as _LengthReader
except ImportError:  # pragma: no cover
    _GunicornBody = _LengthReader = None  # type: ignore[assignment,misc]


class GunicornBody:
    """The rest of a gunicorn request body, read straight from the socket into the caller's buffer.

    gunicorn's wsgi.input reads in 1 KiB steps and copies each several times, which holds an upload to a
    few hundred MB/s on a core; recv_into a 1 MiB buffer that is then hashed and written reaches the
    disk's speed. Bytes gunicorn already took off the socket come first; its length bookkeeping is kept,
    so a kept-alive connection's next request starts where it should.
    """

    def __init__(self, reader: Any, sock: socket.socket) -> None:
        self._reader = reader  # gunicorn.http.body.LengthReader: .length is what is left of the body
        self._unreader = reader.unreader
        self._sock = sock

    def readinto(self, view: memoryview) -> int:
        want = min(len(view), self._reader.length)
        if want <= 0:
            return 0
        buffered = self._unreader.buf
        buffered.seek(0, io.SEEK_END)
        if buffered.tell():
            data = self._unreader.read()  # everything buffered, which may run past this body
            if len(data) > want:
                self._unreader.unread(data[want:])
                data = data[:want]
            got = len(data)
            view[:got] = data
        else:
            got = self._sock.recv_into(view[:want])
        self._reader.length -= got
        return got

    def read(self, size: int = -1, /) -> bytes:
        buffer = memoryview(bytearray(min(size, self._reader.length) if size >= 0 else self._reader.length))
        got = self.readinto(buffer)
        return bytes(buffer[:got])


def request_body(django_request: HttpRequest) -> Readable:
    """The request body as a stream that ends at Content-Length, read without parsing it."""
    stream = django_request.META.get("wsgi.input")
    sock = django_request.META.get("gunicorn.socket")
    reader = getattr(stream, "reader", None)
    if (
        _LengthReader is not None
        and isinstance(stream, _GunicornBody)
        and isinstance(reader, _LengthReader)
        and isinstance(sock, socket.socket)
        and isinstance(getattr(getattr(reader, "unreader", None), "buf", None), io.BytesIO)
        and isinstance(getattr(reader, "length", None), int)
    ):
        stream.buf.seek(0, io.SEEK_END)
        if stream.buf.tell() == 0:  # nothing read through wsgi.input yet
            return GunicornBody(reader, sock)
    return django_request  # Django's stream, bounded by Content-Length
