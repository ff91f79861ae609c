"""A new embedded database is a copy of this host's migrated template: the same schema; a used one is never replaced."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bootstrap(var_dir: Path, cache: Path) -> str:
    """manage.py bootstrap as `make run` runs it: the embedded defaults (SQLite in the var folder), its own cache."""
    prefixes = ("DEBUG", "PADDLECLOUD_", "DATABASE_URL", "CELERY_", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(PADDLECLOUD_VAR_DIR=str(var_dir), PADDLECLOUD_EMBEDDED="true", DEBUG="false", XDG_CACHE_HOME=str(cache))
    done = subprocess.run([sys.executable, "manage.py", "bootstrap", "--demo-user", "demo"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0]


def schema(database: Path) -> tuple[set[str], set[tuple[str, str]], int]:
    with closing(sqlite3.connect(database)) as db:
        tables = {row[0] for row in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")}
        applied = set(db.execute("SELECT app, name FROM django_migrations"))
        permissions = db.execute("SELECT count(*) FROM auth_permission").fetchone()[0]
    return tables, applied, permissions


def test_the_second_new_database_is_the_first_ones_copy_and_a_damaged_template_is_migrated_anew(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = bootstrap(tmp_path / "one", cache)
    assert first.startswith("database migrated, and kept as this host's template"), first
    [template] = (cache / "paddlecloud" / "migrated").iterdir()

    second = bootstrap(tmp_path / "two", cache)
    assert second == f"database copied from this host's migrated template ({template})"
    migrated, copied = schema(tmp_path / "one" / "db.sqlite3"), schema(tmp_path / "two" / "db.sqlite3")
    assert copied == migrated and len(copied[1]) > 50 and copied[2] > 0
    with closing(sqlite3.connect(tmp_path / "two" / "db.sqlite3")) as db:  # the copy's own rows, WAL as configured
        assert db.execute("SELECT username FROM auth_user").fetchall() == [("demo",)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)

    # A database with tables is only migrated, never replaced: its user (and password) stay.
    assert bootstrap(tmp_path / "two", cache) == "database migrated"

    template.write_bytes(b"not a database")
    third = bootstrap(tmp_path / "three", cache)
    assert third.startswith("database migrated, and kept as this host's template"), third
    assert schema(tmp_path / "three" / "db.sqlite3") == migrated and schema(template)[1] == migrated[1]
