"""The job spec: fields named as the original `paddlectl submit` named them, each validated with its rule."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from portal.api.serializers import StrictSerializer
from portal.validators import parse_quantity_or_error

MAX_NAME = 40  # so "<name>-<suffix>-pserver-<i>" still fits a 63-character DNS label
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables the launcher sets; a user value would silently break the job's wiring.
RESERVED_ENV_PREFIXES = ("PADDLECLOUD_", "PADDLE_")
RESERVED_ENV_NAMES = {
    "TRAINING_ROLE",
    "POD_IP",
    "TRAINER_ID",
    "TRAINERS",
    "FLAGS_enable_pir_api",
    "PATH",
    "VIRTUAL_ENV",
    "JOB_COMPLETION_INDEX",
}


def validate_job_name(value: str) -> None:
    """DNS-1035 label, at most 40 characters; the rule broken is named."""
    if not value:
        raise serializers.ValidationError("must not be empty")
    if len(value) > MAX_NAME:
        raise serializers.ValidationError(f"must be at most {MAX_NAME} characters (got {len(value)})")
    for char, why in (("_", "'_' is not allowed in DNS names; use '-'"), (".", "'.' is not allowed; use '-'")):
        if char in value:
            raise serializers.ValidationError(why)
    if value != value.lower():
        raise serializers.ValidationError("must be lowercase")
    if not value[0].isascii() or not value[0].isalpha():
        raise serializers.ValidationError("must start with a letter (a-z)")
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c == "-"))})
    if bad:
        raise serializers.ValidationError(f"may contain only a-z, 0-9 and '-' (found {', '.join(map(repr, bad))})")
    if value.endswith("-"):
        raise serializers.ValidationError("must end with a letter or digit")


def _quantity(field: str, examples: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            amount = parse_quantity_or_error(str(value), field, examples)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages[0]) from None
        if amount <= 0:
            raise serializers.ValidationError(f"{field} {value!r} must be greater than zero")

    return check


CPU_EXAMPLES = "a number of cores such as 2, 0.5 or 500m"
MEMORY_EXAMPLES = "1Gi, 1G or 512Mi"


class JobSpecSerializer(StrictSerializer):
    jobname = serializers.CharField(max_length=200, validators=[validate_job_name])
    datacenter = serializers.CharField(max_length=40, required=False)
    package = serializers.CharField(max_length=4096, required=False, allow_blank=True, default="")
    entry = serializers.CharField(max_length=4096, trim_whitespace=True)
    parallelism = serializers.IntegerField(min_value=1, max_value=1000, default=1)
    pservers = serializers.IntegerField(min_value=0, max_value=100, default=0)
    cpu = serializers.CharField(max_length=20, default="1", validators=[_quantity("cpu", CPU_EXAMPLES)])
    memory = serializers.CharField(max_length=20, default="1Gi", validators=[_quantity("memory", MEMORY_EXAMPLES)])
    gpu = serializers.IntegerField(min_value=0, max_value=64, default=0)
    pscpu = serializers.CharField(max_length=20, default="1", validators=[_quantity("pscpu", CPU_EXAMPLES)])
    psmemory = serializers.CharField(max_length=20, default="1Gi", validators=[_quantity("psmemory", MEMORY_EXAMPLES)])
    passes = serializers.IntegerField(min_value=1, max_value=100000, default=1)
    image = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    registry = serializers.CharField(max_length=63, required=False, allow_blank=True, default="")
    env = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=32768), default=dict)
    max_retries = serializers.IntegerField(min_value=0, max_value=10, default=0)
    pending_timeout = serializers.IntegerField(min_value=1, max_value=7 * 86400, required=False)

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise serializers.ValidationError(
                    f"{name!r} is not a valid variable name (letters, digits and '_', not starting with a digit)"
                )
            if name.startswith(RESERVED_ENV_PREFIXES) or name in RESERVED_ENV_NAMES:
                raise serializers.ValidationError(f"{name!r} is set by PaddleCloud and cannot be overridden")
        return value

    def validate_entry(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be empty")
        if "\x00" in value:
            raise serializers.ValidationError("must not contain NUL bytes")
        return value


def cores(quantity: str) -> Decimal:
    return parse_quantity_or_error(quantity, "cpu", CPU_EXAMPLES)


def memory_bytes(quantity: str) -> int:
    return int(parse_quantity_or_error(quantity, "memory", MEMORY_EXAMPLES))


def requested(spec: dict[str, Any]) -> tuple[Decimal, int, int]:
    """(cores, memory bytes, GPUs) the whole job asks for."""
    trainers, pservers = int(spec["parallelism"]), int(spec["pservers"])
    cpu = trainers * cores(spec["cpu"]) + pservers * cores(spec["pscpu"])
    memory = trainers * memory_bytes(spec["memory"]) + pservers * memory_bytes(spec["psmemory"])
    return cpu, memory, trainers * int(spec["gpu"])
