"""Typed readers for settings from environment variables; a bad value names its variable."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: {raw!r} is not a boolean; use true or false")


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}: {raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}: {value} is below the minimum {minimum}")
    return value


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}: {raw!r} is not one of {', '.join(choices)}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str) -> str | None:
    """Read NAME, or the file named by NAME_FILE (how container platforms mount secrets)."""
    direct = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if direct and file_name:
        raise ImproperlyConfigured(f"{name} and {name}_FILE are both set; set only one")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name!r}: {exc.strerror}") from None
    return direct or None


def generated_secret(path: Path, make: Callable[[], str], mode: int = 0o600) -> str:
    """Return the development secret kept at path, creating it (`mode`: 0600, or 0644 for a value that is no
    secret and every process of the portal reads, whatever its user) on first use."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(make() + "\n")
    # link() is atomic and refuses to overwrite: two processes starting at once agree on one key.
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()


SITE_SLOTS = 1024


def site_slot(site: str) -> int:
    """A portal site's slot of SITE_SLOTS (its job uid range, settings.PADDLECLOUD_JOB_UID_BASE): 0 for `legacy`,
    else from its name's hash."""
    if site == "legacy":
        return 0
    return int(hashlib.sha256(site.encode()).hexdigest(), 16) % SITE_SLOTS
