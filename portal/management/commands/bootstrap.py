"""manage.py bootstrap: migrate, create the embedded `local` datacenter and optionally a demo user.

Idempotent: a second run changes nothing that the first created (the demo password stays).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from datacenters.models import Datacenter, Engine, StorageKind
from jobs.engines.local.gpus import detect
from portal import sqlite_template


class Command(BaseCommand):
    help = "Migrate and create the embedded local datacenter (and a demo user with --demo-user NAME)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--demo-user", metavar="NAME", help="create this user with a random password")
        parser.add_argument("--datacenter", default="local", help="name of the local datacenter (default local)")
        parser.add_argument("--skip-migrate", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["skip_migrate"]:
            self.stdout.write(f"database {sqlite_template.migrate()}")
        call_command("collectstatic", interactive=False, verbosity=0)
        self._local_datacenter(options["datacenter"])
        if options["demo_user"]:
            self._demo_user(options["demo_user"])

    def _local_datacenter(self, name: str) -> None:
        root = Path(settings.VAR_DIR) / "pfs" / name
        datacenter, created = Datacenter.objects.get_or_create(
            name=name,
            defaults={
                "description": "Embedded engine: jobs run as processes on the Celery worker's host.",
                "engine": Engine.LOCAL,
                "storage_kind": StorageKind.LOCAL,
                "storage_root": str(root),
            },
        )
        if created:
            self._detect_gpus(datacenter)
        root = Path(datacenter.storage_root)
        for sub in ("home", datacenter.public_path):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.stdout.write(f"datacenter {name!r} {'created' if created else 'exists'} (storage {root})")

    def _detect_gpus(self, datacenter: Datacenter) -> None:
        datacenter.gpus = detect()
        datacenter.save(update_fields=["gpus"])
        self.stdout.write(f"GPUs of this host for {datacenter.name!r}: {', '.join(datacenter.gpus) or 'none'}")

    def _demo_user(self, username: str) -> None:
        credentials = Path(settings.VAR_DIR) / "demo-credentials.json"
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            where = f"; its password is in {credentials}" if credentials.exists() else ""
            self.stdout.write(f"user {username!r} exists{where}")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_user(username=username, password=password, email=f"{username}@example.com")
        fd = os.open(credentials, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"username": username, "password": password}, handle)
        self.stdout.write(f"user {username!r} created with password {password} (also kept in {credentials})")
