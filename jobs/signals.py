"""What the jobs app tells the apps above it (notifications, the scheduler): they listen; jobs imports none of them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent once per job, by the state move that made it final (the one that won), inside its transaction;
# receivers get `job_id`. Work that must see the final row commits first (transaction.on_commit).
job_ended = Signal()

# Sent once per job, when the engine confirmed nothing of it runs any more (its requests are free again);
# receivers get `job_id` and `datacenter_id`. The scheduler listens: freed room is a reason to look again.
# This one signal also breaks the one cycle of work inside jobs, on purpose and only here: a release
# (follow.reconcile) wakes the scheduler, whose admissions start jobs (follow.tasks.submit_job), and a job
# killed while it started is released again. follow.tasks imports follow.reconcile; the way back is this
# signal, connected in JobsConfig.ready (apps.py), so the modules import one another one way.
job_released = Signal()
