"""manage.py migrate_locked: migrates; on PostgreSQL it waits while another session holds the lock, bounded."""

from __future__ import annotations

import io

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from portal.management.commands.migrate_locked import LOCK_KEY


@pytest.mark.django_db(transaction=True)
def test_it_migrates_and_a_second_run_finds_nothing_to_apply() -> None:
    out = io.StringIO()
    call_command("migrate_locked", stdout=out)
    assert "No migrations to apply" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_it_waits_for_another_pods_lock_then_migrates_once_it_is_free() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are PostgreSQL's (CI runs this on PostgreSQL)")
    params = connection.get_connection_params()
    # Another pod: a second real session on the same server, holding the migration lock.
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        out = io.StringIO()
        with pytest.raises(CommandError, match="held the migration lock"):
            call_command("migrate_locked", "--wait", "1", stdout=out)
        assert "another pod is migrating" in out.getvalue()
        other.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    out = io.StringIO()
    call_command("migrate_locked", "--wait", "1", stdout=out)
    assert "No migrations to apply" in out.getvalue()
    with connection.cursor() as cursor:  # released: nobody is left waiting behind us
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s", [LOCK_KEY])
        assert cursor.fetchone() == (0,)
