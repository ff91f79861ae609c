"""The job spec: fields named as the original `paddlectl submit` named them, each validated with its rule.

The rules themselves live in the client's contract (paddlecloud.contract.spec), so paddlectl and the
SDK refuse exactly what the portal refuses; this module wraps them in a serializer.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.conf import settings
from paddlecloud.contract import keeping, predecessors
from paddlecloud.contract import spec as rules
from rest_framework import serializers

from core import addresses
from core.api.serializers import StrictSerializer


def _raise(problem: str | None) -> None:
    if problem:
        raise serializers.ValidationError(problem)


def validate_job_name(value: str) -> None:
    """DNS-1035 label, at most 40 characters; the rule broken is named."""
    _raise(rules.job_name_problem(value))


def _quantity(field: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        _raise(rules.quantity_problem(field, value))

    return check


def _integer(field: str, **kwargs: Any) -> serializers.IntegerField:
    low, high = rules.LIMITS[field]
    return serializers.IntegerField(min_value=low, max_value=high, **kwargs)


def _quantity_field(field: str) -> serializers.CharField:
    # No max_length here: the contract's parser bounds the length and says so in its message.
    return serializers.CharField(default=rules.DEFAULTS[field], validators=[_quantity(field)])


class JobSpecSerializer(StrictSerializer):
    jobname = serializers.CharField(max_length=200, validators=[validate_job_name])
    datacenter = serializers.CharField(max_length=40, required=False)
    package = serializers.CharField(max_length=rules.MAX_PACKAGE, required=False, allow_blank=True, default="")
    entry = serializers.CharField(max_length=rules.MAX_ENTRY, trim_whitespace=True)
    parallelism = _integer("parallelism", default=1)
    min_parallelism = _integer(
        "min_parallelism", required=False, help_text="Elastic (collective mode): the fewest trainers it may run with; "
        "it starts with the most of min_parallelism..parallelism that fit, and grows when room frees (a restart from "
        "its checkpoint). Absent: exactly parallelism."
    )  # fmt: skip
    pservers = _integer("pservers", default=0)
    cpu = _quantity_field("cpu")
    memory = _quantity_field("memory")
    gpu = _integer("gpu", default=0)
    pscpu = _quantity_field("pscpu")
    psmemory = _quantity_field("psmemory")
    passes = _integer("passes", default=1)
    image = serializers.CharField(max_length=rules.MAX_IMAGE, required=False, allow_blank=True, default="")
    registry = serializers.CharField(max_length=rules.MAX_REGISTRY, required=False, allow_blank=True, default="")
    build = serializers.CharField(
        max_length=40,
        required=False,
        allow_blank=True,
        help_text="An image build (POST /images) to wait for and run on: its image and registry are the job's.",
    )
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=rules.MAX_ENV_VALUE),
        default=dict,
    )
    params = serializers.JSONField(
        required=False,
        default=dict,
        help_text="The run's hyperparameters, name -> string, number or bool (at most 64; names a-z0-9_, a letter "
        "first): the job reads them with paddlecloud.params() (PADDLECLOUD_PARAMS, JSON).",
    )
    after = serializers.JSONField(
        required=False,
        help_text="Jobs of yours this one starts after, each `NAME[:ok|any|failed]` (ok when left out; at most 16): "
        "it waits (WaitingForDependency) until each ended so, and fails DependencyNeverSatisfied if one cannot.",
    )
    resume_from = serializers.CharField(
        required=False, allow_blank=True, max_length=80,
        help_text="JOB[:STEP]: start from a checkpoint of another run of yours (its latest without STEP); the job "
        "finds it as paddlecloud.checkpoint.latest(). Absent: a rerun of a failed job resumes from that run's "
        "latest checkpoint; empty: never.",
    )  # fmt: skip
    keep = serializers.JSONField(
        required=False,
        help_text="{best: N, latest: M, goal: minimize|maximize}: once the job ended, its checkpoints other than the "
        "latest M and the best N by the metric each was saved with are removed (keys left out: 1, 1, minimize). "
        "Absent: the job's own paddlecloud.checkpoint.save(keep=...) alone decides.",
    )
    max_retries = _integer("max_retries", default=0)
    max_restarts = _integer(
        "max_restarts", default=0, help_text="Times the whole job runs again, from its latest checkpoint, after a "
        "failure (a process's non-zero exit, OOM or loss, a rendezvous or stall timeout); 0: it fails."
    )  # fmt: skip
    priority = serializers.CharField(
        max_length=rules.MAX_PRIORITY, required=False, allow_blank=True, default="",
        help_text="A priority class (GET /api/v1/priorities); empty: `normal`. Operators choose who may use which.",
    )  # fmt: skip
    no_preempt = serializers.BooleanField(
        default=False, help_text="Ask not to be preempted; only classes that allow it (staff always may)."
    )
    pending_timeout = _integer("pending_timeout", required=False)
    stall_timeout = _integer(
        "stall_timeout", required=False, help_text="Seconds without a trainer's log line before it is Stalled; "
        "absent: the datacenter's default (GET /api/v1/datacenters)."
    )  # fmt: skip
    stall_action = serializers.ChoiceField(
        rules.STALL_ACTIONS, default="warn", help_text="warn: a `Stalled` warning and event; fail: also fail it."
    )
    notify = serializers.JSONField(
        required=False, default=None, help_text='{"email": true, "webhook": "https://..."}; absent: the profile default'
    )

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        _raise(rules.env_problem(value))
        return value

    def validate_notify(self, value: object) -> object:
        _raise(rules.notify_problem(value))
        if isinstance(value, dict) and value.get("webhook"):  # the form is checked: where it points, now
            _raise(addresses.url_problem(value["webhook"], settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE))
        return value

    def validate_after(self, value: object) -> object:
        _raise(predecessors.after_problem(value))
        return value

    def validate_resume_from(self, value: str) -> str:
        _raise(predecessors.resume_from_problem(value))
        return value

    def validate_entry(self, value: str) -> str:
        _raise(rules.entry_problem(value))
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The rules across fields: env names reserved in the job's mode only (pservers > 0); a param's problem
        names the param (`params.<name>`), a keep policy's its key (`keep.best`)."""
        problem = rules.env_problem(attrs.get("env") or {}, attrs.get("pservers", 0))
        if problem:
            raise serializers.ValidationError({"env": [problem]})
        bad_param = rules.params_problem(attrs.get("params", {}))
        if bad_param:
            raise serializers.ValidationError({bad_param[0]: [bad_param[1]]})
        if "min_parallelism" in attrs:
            sizes = (attrs["min_parallelism"], attrs.get("parallelism", 1), attrs.get("pservers", 0))
            bad_size = rules.elastic_problem(*sizes)
            if bad_size:
                raise serializers.ValidationError({"min_parallelism": [bad_size]})
        bad_keep = keeping.policy_problem(attrs["keep"]) if "keep" in attrs else None
        if bad_keep:
            raise serializers.ValidationError({bad_keep[0]: [bad_keep[1]]})
        return attrs


def requested(spec: dict[str, Any]) -> tuple[Decimal, int, int]:
    """(cores, memory bytes, GPUs) the whole job asks for."""
    return rules.requested(spec)
