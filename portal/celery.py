"""The Celery app: broker and beat schedule come from Django settings (CELERY_*)."""

from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
# The embedded broker (see core/broker.py), by URL: pcfs://
TRANSPORT_ALIASES.setdefault("pcfs", "core.broker:Transport")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
