"""jobs 0006 moves `kill -rm`'s flag out of engine_data into Job.remove_when_released, and back on reverse."""

from __future__ import annotations

import importlib

from django.apps import apps
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.models import Job

migration = importlib.import_module("jobs.migrations.0006_job_remove_when_released")


def test_the_flag_moves_to_the_field_and_back_keeping_the_engines_keys(alice: User, local_dc: Datacenter) -> None:
    spec = {"parallelism": 1, "pservers": 0}
    flagged = Job.objects.create(
        owner=alice, datacenter=local_dc, name="a", uid="a-1", spec=spec, engine_data={"remove": True, "ports": [1]}
    )
    plain = Job.objects.create(
        owner=alice, datacenter=local_dc, name="b", uid="b-1", spec=spec, engine_data={"ports": [2]}
    )
    migration.flag_to_field(apps, None)
    flagged.refresh_from_db()
    plain.refresh_from_db()
    assert flagged.remove_when_released and flagged.engine_data == {"ports": [1]}
    assert not plain.remove_when_released and plain.engine_data == {"ports": [2]}
    migration.field_to_flag(apps, None)
    flagged.refresh_from_db()
    plain.refresh_from_db()
    assert flagged.engine_data == {"ports": [1], "remove": True}
    assert plain.engine_data == {"ports": [2]}
