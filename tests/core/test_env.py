"""Settings come from typed env vars; a bad value fails loudly with the variable's name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_int, env_list, env_secret, generated_secret, site_slot

ROOT = Path(__file__).resolve().parents[2]


def test_env_bool_accepts_the_usual_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("1", True), ("TRUE", True), ("yes", True), ("off", False), ("0", False)]:
        monkeypatch.setenv("X_FLAG", raw)
        assert env_bool("X_FLAG", not expected) is expected


def test_env_bool_names_the_variable_on_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG: 'maybe' is not a boolean"):
        env_bool("X_FLAG", False)


def test_env_int_rejects_text_and_values_below_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_NUM: 'ten' is not an integer"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "0")
    with pytest.raises(ImproperlyConfigured, match="X_NUM: 0 is below the minimum 1"):
        env_int("X_NUM", 1, minimum=1)
    monkeypatch.delenv("X_NUM")
    assert env_int("X_NUM", 7) == 7


def test_env_list_splits_and_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_LIST", " a.example, b.example ,,")
    assert env_list("X_LIST", []) == ["a.example", "b.example"]


def test_env_secret_reads_the_file_variant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret_file = tmp_path / "s"
    secret_file.write_text("from-file\n")
    monkeypatch.delenv("X_SECRET", raising=False)
    monkeypatch.setenv("X_SECRET_FILE", str(secret_file))
    assert env_secret("X_SECRET") == "from-file"
    monkeypatch.setenv("X_SECRET", "direct")
    with pytest.raises(ImproperlyConfigured, match="X_SECRET and X_SECRET_FILE are both set"):
        env_secret("X_SECRET")
    monkeypatch.delenv("X_SECRET")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_SECRET_FILE: cannot read"):
        env_secret("X_SECRET")


def test_generated_secret_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "k"
    first = generated_secret(path, lambda: "one")
    second = generated_secret(path, lambda: "two")
    assert first == second == "one"
    assert path.stat().st_mode & 0o777 == 0o600


def _load_settings(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DEBUG", "PADDLECLOUD_", "DATABASE_URL", "CELERY_", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL")
        )
    }
    full.update({"PADDLECLOUD_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "portal.settings", **env})
    code = "import django; django.setup(); from django.core.management import call_command; call_command('check')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG: 'maybe' is not a boolean"),
        ({"PADDLECLOUD_TOKEN_TTL_DAYS": "0"}, "PADDLECLOUD_TOKEN_TTL_DAYS: 0 is below the minimum 1"),
        ({"PADDLECLOUD_ENCRYPTION_KEY": "not-a-key"}, "PADDLECLOUD_ENCRYPTION_KEY: key #1 is not a Fernet key"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL: 'LOUD' is not one of"),
    ],
)
def test_a_bad_setting_stops_the_portal_naming_the_variable(env: dict[str, str], message: str, tmp_path: Path) -> None:
    result = _load_settings(env, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_without_required_settings_fails_the_system_check(tmp_path: Path) -> None:
    result = _load_settings({"DEBUG": "false", "ALLOWED_HOSTS": "portal.example"}, tmp_path)
    assert result.returncode != 0
    for name in ("SECRET_KEY", "PADDLECLOUD_ENCRYPTION_KEY", "DATABASE_URL", "CELERY_BROKER_URL"):
        assert f"{name} must be set when DEBUG is off" in result.stderr
    assert "ALLOWED_HOSTS must be set" not in result.stderr


def _site_and_uid_base(var_dir: Path) -> tuple[str, int]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECLOUD_", "DJANGO_SETTINGS_MODULE"))}
    full.update({"PADDLECLOUD_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    code = "from portal import settings; print(settings.PADDLECLOUD_SITE, settings.PADDLECLOUD_JOB_UID_BASE)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    site, base = done.stdout.split()
    return site, int(base)


def test_two_portals_on_one_host_get_sites_of_their_own_and_an_old_var_folder_keeps_its_uids(tmp_path: Path) -> None:
    """Two fresh var folders (two portals' `make run` on one host): each a site of its own, kept in its var folder,
    whose slot places its job uids (jobs.engines.local.world.job_ids); a var folder that ran local jobs before sites
    existed is `legacy`, its jobs' uids where they were."""
    first, second = _site_and_uid_base(tmp_path / "a"), _site_and_uid_base(tmp_path / "b")
    assert first[0] != second[0] and all(len(site) == 12 for site, _ in (first, second))
    for site, base in (first, second):
        assert base == 1_000_000_000 + site_slot(site) * 2**20 and base + 2**20 < 2**31 - 2
    assert _site_and_uid_base(tmp_path / "a") == first  # kept: the same uids at every start
    assert (tmp_path / "a" / "site-id").stat().st_mode & 0o777 == 0o644  # no secret: every portal process reads it
    old = tmp_path / "old"
    (old / "local-engine").mkdir(parents=True)
    assert _site_and_uid_base(old) == ("legacy", 1_000_000_000)
