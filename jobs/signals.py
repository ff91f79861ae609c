"""What the jobs app tells the apps above it (notifications, the scheduler): they listen; jobs imports none of them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent once per job, by the state move that made it final (the one that won), inside its transaction;
# receivers get `job_id`. Work that must see the final row commits first (transaction.on_commit).
job_ended = Signal()

# Sent once per job, when the engine confirmed nothing of it runs any more (its requests are free again);
# receivers get `job_id` and `datacenter_id`. The scheduler listens: freed room is a reason to look again.
job_released = Signal()
