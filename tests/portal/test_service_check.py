"""paddlecloud.W011: local jobs on a host whose broker, cache or database answers without a password."""

from __future__ import annotations

import socket

import psutil
import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from datacenters.models import Datacenter, Engine
from portal.checks import local_jobs_beside_open_services, unprotected_local_services


def an_address_of_this_host() -> str | None:
    for nics in psutil.net_if_addrs().values():
        for address in nics:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return str(address.address)
    return None


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "redis://localhost:6379/1", "rediss://user@127.0.0.1:6380/0", "redis://[::1]/0",
     "redis://0.0.0.0:6379/0", "postgresql://paddlecloud@localhost:5432/paddlecloud", "amqp://guest@127.0.0.2//",
     f"redis://{socket.gethostname()}:6379/0"],
)  # fmt: skip
def test_a_server_on_this_host_without_a_password_is_named(url: str) -> None:
    assert unprotected_local_services({"CELERY_BROKER_URL": url}) == ["CELERY_BROKER_URL"]


def test_an_address_of_one_of_this_hosts_interfaces_counts_as_this_host() -> None:
    address = an_address_of_this_host()
    if address is None:
        pytest.skip("this host has no IPv4 address but loopback")
    assert unprotected_local_services({"PADDLECLOUD_CACHE_URL": f"redis://{address}:6379/1"}) == [
        "PADDLECLOUD_CACHE_URL"
    ]


@pytest.mark.parametrize(
    "url",
    ["redis://:s3cret@127.0.0.1:6379/0", "postgresql://paddlecloud:pw@localhost/paddlecloud",
     "redis://redis.example.com:6379/0", "redis://192.0.2.10:6379/0", "pcfs://", "sqlite:////var/db.sqlite3",
     "postgresql:///paddlecloud", ""],
)  # fmt: skip
def test_a_password_another_host_or_no_server_is_not_named(url: str) -> None:
    assert unprotected_local_services({"DATABASE_URL": url}) == []


@pytest.mark.django_db
def test_the_check_warns_only_where_a_local_datacenter_exists(
    settings: SettingsWrapper, local_dc: Datacenter
) -> None:
    settings.DATABASE_URL = "postgresql://paddlecloud@127.0.0.1:5432/paddlecloud"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.PADDLECLOUD_CACHE_URL = "redis://:pw@127.0.0.1:6379/1"
    (warning,) = local_jobs_beside_open_services()
    assert warning.id == "paddlecloud.W011"
    assert "'local'" in warning.msg and "DATABASE_URL, CELERY_BROKER_URL" in warning.msg
    assert "PADDLECLOUD_CACHE_URL" not in warning.msg and "requirepass" in (warning.hint or "")
    Datacenter.objects.filter(engine=Engine.LOCAL).update(engine=Engine.KUBERNETES)
    assert local_jobs_beside_open_services() == []


@pytest.mark.django_db
def test_the_check_is_quiet_with_passwords(settings: SettingsWrapper, local_dc: Datacenter) -> None:
    settings.DATABASE_URL = "postgresql://paddlecloud:pw@127.0.0.1:5432/paddlecloud"
    settings.CELERY_BROKER_URL = "redis://:pw@127.0.0.1:6379/0"
    settings.PADDLECLOUD_CACHE_URL = ""
    assert local_jobs_beside_open_services() == []
