"""manage.py migrate_locked: migrates; on PostgreSQL it waits while another session holds the lock, bounded."""

from __future__ import annotations

import io
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from paddlecloud.contract.units import free_ports

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


@pytest.mark.django_db(transaction=True)
def test_it_waits_for_a_database_that_does_not_answer_yet_then_says_which_and_stops(tmp_path: Path) -> None:
    settings = connection.settings_dict
    saved = dict(settings)
    connection.close()
    # A server that is not there yet: a closed port on PostgreSQL, a folder that does not exist on SQLite.
    if connection.vendor == "postgresql":
        settings.update(HOST="127.0.0.1", PORT=str(free_ports(1)[0]))
    else:
        settings["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
    out = io.StringIO()
    try:
        with pytest.raises(CommandError, match="the database did not answer within 2 s"):
            call_command("migrate_locked", "--wait", "2", stdout=out)
    finally:
        connection.close()
        settings.clear()
        settings.update(saved)
    assert out.getvalue().startswith("waiting for the database:"), out.getvalue()
    call_command("migrate_locked", "--wait", "2", stdout=io.StringIO())  # the real one answers at once
