"""core.api's DateTimeField writes what DRF's writes, in the portal's time zone, whichever it is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings
from rest_framework import serializers

from core.api.serializers import DateTimeField


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/Los_Angeles"])
def test_a_time_is_written_as_drfs_own_field_writes_it_in_the_portals_zone(zone: str) -> None:
    moments = [datetime(2026, 11, 30, 3, 1, 29, 123456, tzinfo=UTC), datetime(2026, 7, 1, 23, 59, 0, tzinfo=UTC)]
    with override_settings(TIME_ZONE=zone):
        for moment in moments:
            ours = DateTimeField().to_representation(moment)
            assert ours == serializers.DateTimeField().to_representation(moment)
            assert ours.endswith("Z") == (zone == "UTC")  # written in that zone, with its offset
    assert DateTimeField().to_representation(moments[0]) == "2026-11-30T03:01:29.123456Z"  # the tests' zone: UTC
