"""Cache backends that keep values as JSON: nothing read back from the cache is ever unpickled.

Django's Redis and file caches pickle their values, so whoever can write a cache entry (a process
that reaches the Redis server, or the cache folder) makes the portal run code when it reads it back.
These store JSON instead; an entry that is not JSON (planted, or left by an older portal) is a miss.
Everything the portal caches (the login throttle's lists of times) is JSON. Each also gives a lock
(`exclusive`) for a read-modify-write of entries, held across every process that shares the cache.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from django.core.cache.backends import filebased, redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.files import locks


class UndecodableValue(ValueError):
    """A cache entry that is not JSON: treated as missing."""


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UndecodableValue(str(exc)) from None


class JSONSerializer:
    """RedisCacheClient's serializer, in JSON; integers stay plain so incr() and decr() remain atomic."""

    def dumps(self, obj: Any) -> bytes | int:
        return obj if type(obj) is int else encode(obj)

    def loads(self, data: bytes | str) -> Any:
        try:
            return int(data)
        except ValueError:
            return decode(data)


_SERIALIZER = JSONSerializer()


class JSONRedisCacheClient(redis.RedisCacheClient):
    def get(self, key: Any, default: Any) -> Any:
        try:
            return super().get(key, default)
        except UndecodableValue:
            return default

    def get_many(self, keys: Any) -> dict[Any, Any]:
        found = {}
        for key, data in zip(keys, self.get_client(None).mget(keys), strict=True):
            if data is not None:
                with suppress(UndecodableValue):
                    found[key] = _SERIALIZER.loads(data)
        return found


class RedisCache(redis.RedisCache):
    """Django's Redis cache with JSON values (OPTIONS may not choose another serializer)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        options = {**params.get("OPTIONS", {}), "serializer": JSONSerializer}
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = JSONRedisCacheClient

    def exclusive(self, name: str) -> AbstractContextManager[object]:
        """A lock on every host that uses this Redis (redis-py's; it expires after 10 s if its holder dies)."""
        client = self._cache.get_client(None, write=True)
        return client.lock(self.make_and_validate_key(f"lock:{name}"), timeout=10, blocking_timeout=10)  # type: ignore[no-any-return]


class FileBasedCache(filebased.FileBasedCache):
    """Django's file cache with each file as a JSON expiry line and a JSON value."""

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """A lock of every process on this host that uses this folder: flock on a file beside the entries
        (not a cache file, so culling and clear() leave it)."""
        folder = Path(self._dir)  # type: ignore[attr-defined]  # private, not in the stubs
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (folder / f"{hashlib.sha256(name.encode()).hexdigest()[:32]}.lock").open("ab") as f:
            locks.lock(f, locks.LOCK_EX)
            try:
                yield
            finally:
                locks.unlock(f)

    def _path(self, key: str, version: int | None) -> Path:
        return Path(self._key_to_file(key, version))  # type: ignore[attr-defined]  # private, not in the stubs

    def get(self, key: str, default: Any = None, version: int | None = None) -> Any:
        with suppress(FileNotFoundError, UndecodableValue), self._path(key, version).open("rb") as f:
            if not self._is_expired(f):
                return decode(f.read())
        return default

    def _write_content(self, file: IO[bytes], timeout: float | None, value: Any) -> None:
        file.write(encode(self.get_backend_timeout(timeout)) + b"\n")
        file.write(encode(value))

    def touch(self, key: str, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        with suppress(FileNotFoundError, UndecodableValue), self._path(key, version).open("r+b") as f:
            locks.lock(f, locks.LOCK_EX)
            try:
                if self._is_expired(f):
                    return False
                value = decode(f.read())
                f.seek(0)
                f.truncate()
                self._write_content(f, timeout, value)
                return True
            finally:
                if not f.closed:  # an expired entry was closed and deleted
                    locks.unlock(f)
        return False

    def _is_expired(self, f: IO[bytes]) -> bool:
        try:
            expiry = decode(f.readline())
        except UndecodableValue:
            expiry = 0  # empty, or not written by this class: expired, so it is deleted
        if expiry is not None and expiry < time.time():
            f.close()
            self._delete(f.name)  # type: ignore[attr-defined]
            return True
        return False
