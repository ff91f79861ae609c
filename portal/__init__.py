"""The PaddleCloud portal (Django project); loads the Celery app so tasks bind to it."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
