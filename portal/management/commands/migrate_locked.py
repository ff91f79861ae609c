"""manage.py migrate_locked: `migrate` under a PostgreSQL advisory lock, so pods starting together migrate once.

Every portal pod of deploy/ runs this as its init container. The first to take the lock applies the
pending migrations (each in its own transaction); the others wait for the lock, then find nothing
left to apply. So a migration is applied exactly once however many pods start at the same moment,
and no pod's main container starts before the schema is current. SQLite (one host) needs no lock.
Pods applied together with their database (deploy/overlays/with-services) start before it answers:
the command waits for it, bounded by the same `--wait`, instead of failing into a restart backoff.
"""

from __future__ import annotations

import time
from typing import Any

import tenacity
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError, connection

# pg_advisory_lock's key: any constant no other program on the database uses ("PCmg").
LOCK_KEY = 0x50436D67
POLL_SECONDS = 1.0


class Command(BaseCommand):
    help = "Apply migrations, one pod at a time (a PostgreSQL advisory lock); others wait, then apply nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--wait", type=int, default=600, help="seconds to wait for the database, then for the lock (default 600)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._reach_database(options["wait"])
        if connection.vendor != "postgresql":
            call_command("migrate", interactive=False, stdout=options.get("stdout"))
            return
        self._lock(options["wait"])
        try:
            with connection.cursor() as cursor:
                # A migration may rewrite a big table: this session alone drops the request-sized bound.
                cursor.execute("SET statement_timeout = 0")
            call_command("migrate", interactive=False, stdout=options.get("stdout"))
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])

    def _reach_database(self, wait: int) -> None:
        def tell(state: tenacity.RetryCallState) -> None:
            if state.attempt_number == 1 and state.outcome is not None:
                self.stdout.write(f"waiting for the database: {state.outcome.exception()}".strip())

        try:
            for attempt in tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(OperationalError),
                stop=tenacity.stop_after_delay(wait),
                wait=tenacity.wait_fixed(POLL_SECONDS),
                before_sleep=tell,
                reraise=True,
            ):
                with attempt:
                    connection.ensure_connection()
        except OperationalError as exc:
            raise CommandError(f"the database did not answer within {wait} s: {exc}".strip()) from exc

    def _lock(self, wait: int) -> None:
        # pg_try_advisory_lock in a loop rather than pg_advisory_lock: no statement outlives
        # statement_timeout, and the wait has our own bound with a message saying what we waited for.
        deadline = time.monotonic() + wait
        announced = False
        while True:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
                row = cursor.fetchone()
            if row and row[0]:
                return
            if time.monotonic() > deadline:
                raise CommandError(f"another pod has held the migration lock for over {wait} s; is it stuck?")
            if not announced:
                self.stdout.write("another pod is migrating; waiting for it")
                announced = True
            time.sleep(POLL_SECONDS)
