"""Celery tasks of experiments: advance one when a trial's job ended, and every experiment that runs on beat (the
safety net for a lost message). Idempotent: advance decides under the experiment's row lock."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from kombu.exceptions import OperationalError as KombuOperationalError

from experiments import services
from experiments.models import Experiment, ExperimentState, Trial

log = logging.getLogger(__name__)


@shared_task(name="experiments.advance", acks_late=True, ignore_result=True)
def advance(experiment_id: int) -> None:
    if services.advance(experiment_id):  # more trials to submit now: another pass, as a message of its own
        advance.delay(experiment_id)


@shared_task(name="experiments.advance_all", ignore_result=True)
def advance_all() -> None:
    """Every running experiment, and every other one with a trial still to record (killed while trials ran)."""
    unrecorded = Trial.objects.exclude(state__in=[*services.FINAL, services.WAITING]).values("experiment_id")
    due = Experiment.objects.filter(Q(state=ExperimentState.RUNNING) | Q(pk__in=unrecorded))
    for experiment_id in due.values_list("pk", flat=True):
        try:
            services.advance(experiment_id)
        except Exception:  # one experiment that cannot advance must not stop the others'
            log.exception("experiment %s: advance failed", experiment_id)


def advance_soon(experiment_id: int) -> None:
    """Advance the experiment in a worker once the caller's transaction committed; a broker that does not take the
    message leaves it to beat's advance_all."""

    def send() -> None:
        try:
            advance.delay(experiment_id)
        except (KombuOperationalError, OSError) as exc:
            log.warning("experiment %s: the broker did not take its advance (%s); beat does it", experiment_id, exc)

    transaction.on_commit(send)


def on_trial_job_changed(sender: Any, job_id: int, **kwargs: Any) -> None:
    """Receives jobs.signals.job_ended and job_released: a trial's end (its files final once it is released) may
    let the next one start."""
    experiment_id = Trial.objects.filter(job_id=job_id).values_list("experiment_id", flat=True).first()
    if experiment_id is not None:
        advance_soon(experiment_id)
