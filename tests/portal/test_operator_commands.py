"""Operator commands: bootstrap is idempotent; key rotation re-encrypts every secret."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from pytest_django.fixtures import Settings

from core.crypto import _fernet
from datacenters.models import Datacenter
from registry.models import RegistrySecret


def test_bootstrap_creates_the_local_datacenter_and_demo_user_once(
    db: None, settings: Settings, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("bootstrap", "--demo-user", "demo", "--skip-migrate", stdout=out)
    credentials = json.loads((tmp_path / "demo-credentials.json").read_text())
    assert credentials["password"] in out.getvalue()
    assert (tmp_path / "demo-credentials.json").stat().st_mode & 0o777 == 0o600
    dc = Datacenter.objects.get(name="local")
    assert dc.engine == "local" and Path(dc.storage_root, "home").is_dir() and Path(dc.storage_root, "public").is_dir()
    assert User.objects.get(username="demo").check_password(credentials["password"])

    again = io.StringIO()
    call_command("bootstrap", "--demo-user", "demo", "--skip-migrate", stdout=again)
    assert credentials["password"] not in again.getvalue()
    assert "exists" in again.getvalue()
    assert Datacenter.objects.count() == 1 and User.objects.filter(username="demo").count() == 1


def _stored_password() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT password FROM registry_registrysecret")
        return str(cursor.fetchone()[0])


def test_rotation_re_encrypts_with_the_new_key_and_old_key_can_be_dropped(alice: User, settings: Settings) -> None:
    old_keys = list(settings.PADDLECLOUD_ENCRYPTION_KEYS)
    RegistrySecret.objects.create(owner=alice, name="harbor", server="h.example", username="u", password="pw-1")
    new_key = Fernet.generate_key().decode()
    settings.PADDLECLOUD_ENCRYPTION_KEYS = [new_key, *old_keys]
    _fernet.cache_clear()
    try:
        call_command("rotate_encryption_key", stdout=io.StringIO())
        assert Fernet(new_key).decrypt(_stored_password().encode()) == b"pw-1"
        settings.PADDLECLOUD_ENCRYPTION_KEYS = [new_key]
        assert RegistrySecret.objects.get().password == "pw-1"
    finally:
        _fernet.cache_clear()
