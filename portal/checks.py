"""System checks: refuse to run in production (DEBUG off) on development defaults, or on unsafe secrets."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import psutil
from django.conf import settings
from django.core.checks import Error, Warning, register
from django.db import DatabaseError

from accounts.throttle import parse_rate
from datacenters.models import Datacenter, Engine


def _missing_production_settings() -> list[str]:
    missing = list(settings.GENERATED_SECRET_FILES)
    if not settings.DATABASE_URL:
        missing.append("DATABASE_URL")
    if settings.CELERY_BROKER_URL.startswith(("pcfs://", "filesystem://")):
        missing.append("CELERY_BROKER_URL")
    if not settings.ALLOWED_HOSTS:
        missing.append("ALLOWED_HOSTS")
    return missing


@register()
def production_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    if settings.DEBUG:
        return []
    if settings.PADDLECLOUD_EMBEDDED:
        # One host, reached only on loopback: generated secrets (0600, checked below), SQLite and
        # the filesystem broker are honest there. Anything reachable must be configured for real.
        others = [host for host in settings.ALLOWED_HOSTS if host not in settings.LOOPBACK_HOSTS]
        return [
            Error(
                f"PADDLECLOUD_EMBEDDED serves loopback only, but ALLOWED_HOSTS has {', '.join(others)}",
                hint="Unset PADDLECLOUD_EMBEDDED and set the production settings (docs/reference/settings.md).",
                id="paddlecloud.E002",
            )
        ] if others else []  # fmt: skip
    return [
        Error(
            f"{name} must be set when DEBUG is off",
            hint=f"Set the environment variable {name} (or {name}_FILE for secrets); see docs/reference/settings.md.",
            id="paddlecloud.E001",
        )
        for name in _missing_production_settings()
    ]


@register()
def generated_secrets_are_private(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = []
    for name, path in settings.GENERATED_SECRET_FILES.items():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            errors.append(Error(
                f"{name} is generated into {path}, which other users can read (mode {mode:o})",
                hint=f"chmod 600 {path}",
                id="paddlecloud.E003",
            ))  # fmt: skip
    return errors


@register()
def login_rate(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = []
    rates = ("PADDLECLOUD_LOGIN_RATE", "PADDLECLOUD_LOGIN_USER_RATE", "PADDLECLOUD_LOGIN_ADDRESS_RATE",
             "PADDLECLOUD_SIGNUP_RATE")  # fmt: skip
    for name in rates:
        try:
            parse_rate(getattr(settings, name))
        except ValueError as exc:
            errors.append(Error(f"{name}: {exc}", hint="e.g. 10/min", id="paddlecloud.E004"))
    return errors


# URL schemes of servers reached over the network (the filesystem broker and SQLite have none).
_SERVER_SCHEMES = ("redis", "rediss", "postgres", "postgresql", "pgsql", "postgis", "amqp", "amqps", "mysql")


def _this_host(host: str) -> bool:
    """Whether `host` names this machine: localhost, its own name, loopback, or an address of its interfaces."""
    if not host:
        return False  # a Unix socket (PostgreSQL's peer authentication checks the caller's uid)
    if host in ("localhost", socket.gethostname()) or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # another name: not resolved here (a check must not wait on DNS)
    if ip.is_loopback or ip.is_unspecified:
        return True
    local = {address.address.split("%", 1)[0] for nics in psutil.net_if_addrs().values() for address in nics}
    return str(ip) in local


def unprotected_local_services(urls: dict[str, str]) -> list[str]:
    """The names of the URLs that reach a server on this host without a password."""
    found = []
    for name, url in urls.items():
        parts = urlsplit(url or "")
        if parts.scheme.split("+", 1)[0] in _SERVER_SCHEMES and not parts.password and _this_host(parts.hostname or ""):
            found.append(name)
    return found


@register()
def local_jobs_beside_open_services(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    urls = {
        "DATABASE_URL": settings.DATABASE_URL or "",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PADDLECLOUD_CACHE_URL": settings.PADDLECLOUD_CACHE_URL or "",
    }
    names = unprotected_local_services(urls)
    if not names:
        return []
    try:
        local = list(Datacenter.objects.filter(engine=Engine.LOCAL).values_list("name", flat=True))
    except DatabaseError:
        return []  # not migrated yet
    return [
        Warning(
            f"datacenter {', '.join(map(repr, local))} runs jobs on this host, where {', '.join(names)} "
            "reaches a server without a password",
            hint="Whatever on this host can connect to it could read or change the portal's data or queue "
            "tasks: set a password on the server (Redis requirepass, a PostgreSQL role password) and put "
            "it in the URL.",
            id="paddlecloud.W011",
        )
    ] if local else []  # fmt: skip
