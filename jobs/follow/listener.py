"""The control worker hears its jobs change and reconciles at once: local jobs' process events
(jobs/engines/local/events.py) and Kubernetes objects' watch events (jobs/engines/kubernetes/watch.py).

Started by Celery's worker_ready signal in the worker that consumes the control lane (core/lanes.py),
on daemon threads of their own: an event never waits for a worker slot or a broker round trip.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from core import lanes
from jobs.engines.local import events
from jobs.follow.tasks import reconcile_promptly
from jobs.models import Job

log = logging.getLogger(__name__)
_stop = threading.Event()


def start_if_control(sender: Any = None, **kwargs: Any) -> None:
    """worker_ready receiver: listen when this worker consumes the control lane."""
    consumed = set(sender.app.amqp.queues.consume_from) if sender is not None else set()
    if lanes.queue(lanes.CONTROL) not in consumed:
        return
    threading.Thread(target=_listen, name="local-job-events", daemon=True).start()
    log.info("listening for local jobs' process events on %s", events.pipe_path())
    if settings.PADDLECLOUD_K8S_WATCH:
        # Imported here, not above: every portal and worker process imports this module at start-up and the
        # Kubernetes client would cost each ~0.5 s; only a control worker with a watch needs it.
        from jobs.engines.kubernetes import watch  # noqa: PLC0415

        watch.enable(kubernetes_changed)  # the reconciler here watches its Kubernetes datacenters


def stop(sender: Any = None, **kwargs: Any) -> None:
    """worker_shutdown receiver."""
    _stop.set()
    watch = sys.modules.get("jobs.engines.kubernetes.watch")  # a watch runs only where it was imported
    if watch is not None:
        watch.disable()


def kubernetes_changed(job_uids: set[str]) -> None:
    """Watch events named these jobs' objects: reconcile the ones still followed, now."""
    try:
        ids = set(Job.objects.filter(uid__in=job_uids, released=False).values_list("pk", flat=True))
    finally:
        close_old_connections()  # the watch's own thread: never keep a connection the database closed
    if ids:
        reconcile_promptly(ids)


def _listen() -> None:
    while not _stop.is_set():
        try:
            events.listen(reconcile_promptly, _stop)
        except Exception:
            log.exception("local job events: the listener failed; listening again in 1 s")
            _stop.wait(1.0)
