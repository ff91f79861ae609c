"""A new SQLite database starts as a copy of one this host migrated before from the same migrations.

Migrating an empty SQLite database takes seconds (50 migrations, each ALTER a table rebuild), every `make run` in a
fresh clone and every new var folder. The schema is a function of the migrations alone (their data migrations find
no rows in an empty database, and the content types and permissions come from the installed apps, whose migration
folders are hashed too), so the first migrated database is kept per host under the cache, named by the hash of
Django's and SQLite's versions and every app's migration files, the way Kubernetes' envtest keeps its binaries by
version. A later new database (SQLite, no table yet) is that copy, then migrated as always (a no-op unless something
was missed); PostgreSQL and a database with tables are only ever migrated.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import django
from django.apps import apps
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "paddlecloud" / "migrated"


def template_key() -> str:
    """What the migrated schema depends on: Django's and SQLite's versions and every app's migration files."""
    digest = hashlib.sha256(f"django {django.get_version()} sqlite {sqlite3.sqlite_version}\n".encode())
    for app in apps.get_app_configs():  # in INSTALLED_APPS' order, which orders the migrations' post_migrate rows
        for path in sorted((Path(app.path) / "migrations").glob("*.py")):
            digest.update(f"{app.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def _keep(connection: BaseDatabaseWrapper, template: Path) -> None:
    """A consistent single-file copy of the database (SQLite's backup, whatever its WAL holds), renamed into place."""
    template.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{template.name}.", dir=template.parent)
    os.close(fd)
    try:
        connection.ensure_connection()
        with closing(sqlite3.connect(temporary)) as copy:
            connection.connection.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # read-only, it needs no -wal or -shm beside it
        Path(temporary).replace(template)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def migrate(alias: str = DEFAULT_DB_ALIAS) -> str:
    """Migrate the database; a new SQLite one from this host's template where there is one. Says which it did."""
    connection = connections[alias]
    new = isinstance(connection, SQLiteWrapper) and not connection.is_in_memory_db()
    new = new and not connection.introspection.table_names()  # a file may be there: opened, never migrated
    if not new:
        call_command("migrate", database=alias, interactive=False, verbosity=0)
        return "migrated"
    template = cache_dir() / f"{template_key()}.sqlite3"
    if template.is_file():
        try:
            # Into the open database (SQLite's backup writes through its locks), not a file put in its place: another
            # process of `make run` may have it open already.
            with closing(sqlite3.connect(f"file:{template}?mode=ro", uri=True)) as source:
                source.backup(connection.connection)
            call_command("migrate", database=alias, interactive=False, verbosity=0)
            return f"copied from this host's migrated template ({template})"
        except (DatabaseError, sqlite3.Error):  # a damaged template: dropped, and this database migrated anew
            template.unlink(missing_ok=True)
            if connection.introspection.table_names():
                raise
    call_command("migrate", database=alias, interactive=False, verbosity=0)
    try:
        _keep(connection, template)
    except (OSError, sqlite3.Error) as error:  # a cache that cannot be written costs the next run time, no more
        return f"migrated (not kept as a template: {error})"
    return f"migrated, and kept as this host's template ({template})"
