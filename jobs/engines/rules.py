"""What an engine requires of a datacenter and of a job spec: checked in the admin and before a submit.

Rules never call a cluster and import nothing heavy; each engine's own live beside it
(local/rules.py, kubernetes/rules.py) and jobs.engines.rules_for(name) finds them.
"""

from __future__ import annotations

from typing import Any

from core.errors import Invalid
from datacenters.models import Datacenter


class EngineRules:
    @classmethod
    def validate_datacenter(cls, datacenter: Datacenter) -> dict[str, str]:
        """What is wrong with the datacenter's settings for this engine, by field; {} when nothing."""
        return {}

    @classmethod
    def check_spec(cls, datacenter: Datacenter, spec: dict[str, Any]) -> None:
        """Refuse (core.errors.Invalid, naming the field) a spec this engine cannot run on `datacenter`."""

    @classmethod
    def check_builds(cls, datacenter: Datacenter) -> None:
        """Refuse (Invalid on `datacenter`) an in-cluster image build where this engine cannot run one."""
        raise Invalid(
            f"{datacenter.name} runs jobs as local processes; in-cluster builds need a kubernetes datacenter",
            "datacenter",
        )

    @classmethod
    def prepare_new(cls, datacenter: Datacenter) -> None:
        """Fill in what a datacenter of this engine starts with when an operator creates it."""
