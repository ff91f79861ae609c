"""The embedded broker: a folder of message files that wakes its consumer at once and loses nothing to a kill.

It is kombu's filesystem transport (so it needs no server), with four faults of that transport fixed:
- Slow under a burst. kombu's consumer sleeps a whole `polling_interval` (1 s) every time a poll
  finds nothing to take, including each time all its worker slots are busy: every task that ends
  left its slot idle for up to a second, and 100 submits at 3/s queued for ~50 s (issue 21). Here
  the consumer waits on inotify (a message file appeared) and on a pipe its own acks write to (a
  slot is free), so it takes the next message the moment there is one; `polling_interval` is only a
  safety net (or the poll where inotify is missing: not Linux).
- Lost to a SIGKILL. kombu deletes a message file when a worker takes it, so with acks_late a worker
  killed mid-task lost its task for good. Here taking a message renames it into the consumer's claim
  folder (`<queue folder>/.claims/<id>/`, locked with flock while the consumer lives); an ack deletes
  it, a reject or a clean shutdown puts it back, and a claim folder whose lock is free (its process
  died) is put back by the next consumer that looks (at its start and every CLAIM_SWEEP_SECONDS).
- Half-written files. kombu writes a message in place, so a reader could list it empty and die on
  the JSON. Here it is written under a hidden name and renamed into the queue: whole or not at all.
- Slow to stop. Celery's consumer loop drains with a 2 s timeout and, once a warm shutdown is asked for,
  drains once more before it stops: a stopping worker sat up to 4 s waiting for messages it would not take.
  Here the shutdown signal wakes every waiting consumer and a stopping worker's drain returns at once.
Each get also reads the folder once per batch, not once per message. Registered as `pcfs://` in
portal/celery.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import select
import uuid
import weakref
from collections import deque
from pathlib import Path
from queue import Empty
from time import monotonic, sleep, time_ns
from typing import Any

from celery.signals import worker_shutting_down
from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

CLAIMS = ".claims"
CLAIM_SWEEP_SECONDS = 10.0  # how soon a live consumer puts back the claims of one that died
# inotify(7): a file renamed into the folder (our writers) or closed after writing (kombu's own).
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080


_waiting: weakref.WeakSet[Wakeup] = weakref.WeakSet()  # every consumer's wakeup in this process
_stopping = False  # this process's worker is shutting down: consumers take nothing more


@worker_shutting_down.connect
def stop_waiting(**_: Any) -> None:
    """The worker is shutting down (Celery sends this from its signal handler): wake every waiting consumer and
    let no drain wait again, so the worker stops now instead of after up to two more 2 s drains."""
    global _stopping
    _stopping = True
    for wakeup in list(_waiting):
        wakeup.poke()


class Wakeup:
    """What a waiting consumer sleeps on: new files in the queue folder, and pokes from its own acks."""

    def __init__(self, folder: str) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._sources = [self._read]
        self.watching = False
        watch = _inotify_watch(folder)
        if watch is not None:
            self._sources.append(watch)
            self.watching = True
        _waiting.add(self)

    def poke(self) -> None:
        if self._write < 0:
            return  # closed
        with contextlib.suppress(BlockingIOError):  # a pipe full of pokes wakes the waiter anyway
            os.write(self._write, b"x")

    def wait(self, timeout: float) -> None:
        """Sleep until something may have changed, at most `timeout` seconds; consume what woke us."""
        ready, _, _ = select.select(self._sources, [], [], max(0.0, timeout))
        for source in ready:
            try:
                while os.read(source, 4096):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        _waiting.discard(self)  # first: a shutdown poke must never write to a closed (or reused) descriptor
        for fd in {*self._sources, self._write}:
            os.close(fd)
        self._sources, self._write = [], -1


def _inotify_watch(folder: str) -> int | None:
    """A non-blocking inotify descriptor watching `folder` for new files, or None where there is none."""
    library = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(library, use_errno=True)
        descriptor = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):
        return None  # not Linux: the consumer polls every polling_interval
    if descriptor < 0:
        return None
    if libc.inotify_add_watch(descriptor, os.fsencode(folder), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
        os.close(descriptor)
        return None
    return descriptor


class QoS(virtual.QoS):
    """Acks delete the claimed file; requeues and shutdown put it back; a freed slot wakes the consumer."""

    channel: Channel

    def ack(self, delivery_tag: str) -> None:
        super().ack(delivery_tag)
        self.channel.settle(delivery_tag, requeue=False)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # Not kombu's re-publish: the same file goes back, at its old place in the queue.
        super().ack(delivery_tag)
        self.channel.settle(delivery_tag, requeue=requeue)

    def restore_unacked(self) -> None:
        delivered = self._delivered if self._delivered is not None else {}
        for delivery_tag in list(delivered):
            self.channel.settle(delivery_tag, requeue=True)  # a no-op for one acked meanwhile
        delivered.clear()


class Claims:
    """This consumer's claim folder, locked while it lives, and the sweep of dead consumers' folders."""

    def __init__(self, queue_folder: Path) -> None:
        self.queue_folder = queue_folder
        self.root = queue_folder / CLAIMS
        self.root.mkdir(exist_ok=True)
        # Made under a hidden name and locked before it is renamed into view: a sweep never sees it unlocked.
        name = uuid.uuid4().hex
        hidden = self.root / f".{name}"
        hidden.mkdir()
        self._lock = (hidden / "lock").open("wb")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.folder = self.root / name
        hidden.rename(self.folder)
        self.next_sweep = 0.0

    def sweep(self) -> None:
        """Put back every message claimed by a consumer that died (its folder's lock is free)."""
        self.next_sweep = monotonic() + CLAIM_SWEEP_SECONDS
        for folder in self.root.iterdir():
            if folder.name.startswith(".") or folder == self.folder:
                continue
            try:
                lock = (folder / "lock").open("rb")
            except OSError:
                continue  # swept by another consumer at this moment
            with lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its consumer lives
                self._put_back(folder)

    def _put_back(self, folder: Path) -> None:
        for message in folder.iterdir():
            if message.name.endswith(".msg"):
                message.replace(self.queue_folder / message.name)
        (folder / "lock").unlink(missing_ok=True)
        folder.rmdir()

    def close(self) -> None:
        # restore_unacked put back what was taken; anything left (no restore asked) goes back too.
        self._put_back(self.folder)
        self._lock.close()


class Channel(filesystem.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claims: Claims | None = None
        self._claimed: dict[str, Path] = {}  # delivery tag -> its file in our claim folder
        self._no_ack_queues: set[str] = set()
        self._listing: dict[str, deque[str]] = {}  # queue -> its message files, oldest first

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu passes **kwargs
        # Wall-clock microseconds, fixed width: names sort in order of sending, across processes and reboots.
        name = f"{time_ns() // 1000:017d}_{uuid.uuid4()}.{queue}.msg"
        final = str(Path(self.data_folder_out) / name)
        # A name starting with "." never matches "<queue>.msg", so readers skip it while it is written.
        temporary = Path(self.data_folder_out) / f".{uuid.uuid4()}.tmp"
        try:
            with temporary.open("wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            temporary.replace(final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        claims = self._claims_folder()
        if monotonic() >= claims.next_sweep:
            claims.sweep()
        # The folder is read once per batch, not once per message: a backlog of N costs O(N), not O(N^2).
        pending = self._listing.get(queue)
        listed = not pending
        if listed:
            pending = self._list(queue)
        while True:
            while pending:
                claimed = claims.folder / pending.popleft()
                try:
                    (Path(self.data_folder_in) / claimed.name).rename(claimed)
                except FileNotFoundError:
                    continue  # another consumer took it first
                return self._read_claimed(queue, claimed)
            if listed:
                raise Empty()
            pending, listed = self._list(queue), True  # the batch was stale: look at the folder once more

    def _list(self, queue: str) -> deque[str]:
        """The queue's message files, oldest first (kombu's rule: the name after its first dot)."""
        wanted = f"{queue}.msg"
        # os.scandir, not Path.iterdir: one Path object per file is most of the cost in a long queue.
        with os.scandir(self.data_folder_in) as entries:
            names = sorted(e.name for e in entries if e.name.partition(".")[2] == wanted)
        self._listing[queue] = deque(names)
        return self._listing[queue]

    def _read_claimed(self, queue: str, claimed: Path) -> Any:
        try:
            payload = loads(bytes_to_str(claimed.read_bytes()))
        except OSError as exc:
            raise ChannelError(f"Cannot read file {str(claimed)!r} from queue.") from exc
        if queue in self._no_ack_queues:
            claimed.unlink(missing_ok=True)
        else:
            self._claimed[payload["properties"]["delivery_tag"]] = claimed
        return payload

    def _claims_folder(self) -> Claims:
        if self._claims is None:
            self._claims = Claims(Path(self.data_folder_in))
        return self._claims

    def settle(self, delivery_tag: str, requeue: bool) -> None:
        """Delete a taken message (acked) or put it back into the queue; then wake our consumer."""
        claimed = self._claimed.pop(delivery_tag, None)
        if claimed is not None:
            try:
                if requeue:
                    claimed.replace(Path(self.data_folder_in) / claimed.name)
                else:
                    claimed.unlink()
            except FileNotFoundError:
                pass  # swept back by another consumer that thought us dead: it is in the queue again
        if isinstance(self.connection, Transport):
            self.connection.poke()

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack_queues.add(queue)  # e.g. remote-control broadcasts: nothing will ack them
        if isinstance(self.connection, Transport):
            # Made before the first message is taken, so the ack of that message finds something to poke.
            self.connection.start_waking(str(self.data_folder_in))
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        message = super().basic_get(queue, no_ack, **kwargs)
        if message is not None and no_ack and message.delivery_tag:
            self.settle(message.delivery_tag, requeue=False)
        return message

    def close(self) -> None:
        super().close()  # puts back what was taken and not acked
        if self._claims is not None:
            self._claims.close()
            self._claims = None


class Transport(filesystem.Transport):
    Channel = Channel
    driver_type = "filesystem"
    driver_name = "pcfs"

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._wakeup: Wakeup | None = None  # made by the first consumer: a connection that only sends needs none

    def start_waking(self, folder: str) -> None:
        if self._wakeup is None:
            self._wakeup = Wakeup(folder)

    def poke(self) -> None:
        if self._wakeup is not None:
            self._wakeup.poke()

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """Deliver one message; between empty polls, wait for a wakeup instead of sleeping blind."""
        interval = self.polling_interval or 1.0
        started = monotonic()
        while True:
            if _stopping:
                raise TimeoutError()  # the worker stops: what is queued stays queued for the next one
            try:
                if self.cycle is not None:
                    self.cycle.get(self._deliver, timeout=timeout)
                    return
            except Empty:
                pass
            left = interval if timeout is None else timeout - (monotonic() - started)
            if left <= 0:
                raise TimeoutError()  # socket.timeout: what kombu and Celery catch
            if self._wakeup is None:
                sleep(min(left, interval))  # no consumer yet: nothing to wake us
            else:
                self._wakeup.wait(min(left, interval))

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        if self._wakeup is not None:
            self._wakeup.close()
            self._wakeup = None
