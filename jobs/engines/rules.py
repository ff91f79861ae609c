"""What an engine requires of a datacenter and of a job spec: checked in the admin and before a submit.

Rules never call a cluster and import nothing heavy; each engine's own live beside it
(local/rules.py, kubernetes/rules.py) and datacenters.models.rules_for(name) finds them. The admin's
engine-specific bits (the host report, GPU detection) are asked of them too.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from core.errors import Invalid
from datacenters.models import Datacenter


class EngineRules:
    admissions: tuple[str, ...] = ("portal",)  # Kueue admits JobSets: only a cluster engine offers it

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

    @classmethod
    def host_report(cls) -> str:
        """What the admin's datacenter page says about the host this engine runs jobs on."""
        return "not applicable: this engine runs jobs on its cluster's nodes"

    @classmethod
    def detect_gpus(cls) -> list[str]:
        """The host GPUs a datacenter of this engine may give jobs (the admin's "Detect GPUs")."""
        return []

    @classmethod
    def host_capacity(cls, datacenter: Datacenter) -> tuple[Decimal | None, int | None, int | None]:
        """(cores, memory bytes, GPUs) a datacenter whose capacity fields are blank has; None: unbounded."""
        return None, None, None
