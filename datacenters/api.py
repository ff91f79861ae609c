"""Datacenter and quota API: what a user may use, their limits and usage; operators set quotas and capacities."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from paddlecloud.contract import quantity as quantity_rules
from rest_framework import exceptions, generics, serializers
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.serializers import StrictModelSerializer, StrictSerializer
from datacenters import quota
from datacenters.capacity import capacity
from datacenters.models import Datacenter, Quota, usable_datacenter


class DatacenterSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    capacity = serializers.SerializerMethodField(
        help_text="What all its running jobs together may hold, as the scheduler reads it (blank fields resolved: "
        "the host's on the local engine); null: unbounded."
    )

    class Meta:
        model = Datacenter
        # Credentials and mount details stay out: users need names, engine and defaults only.
        fields = [
            "name",
            "description",
            "engine",
            "admission",
            "storage_kind",
            "public_path",
            "cpu_image",
            "gpu_image",
            "pending_timeout",
            "stall_timeout",
            "finished_ttl",
            "capacity",
        ]

    @extend_schema_field(
        inline_serializer(
            "Capacity",
            {
                "cpu": serializers.FloatField(allow_null=True, help_text="cores"),
                "memory": serializers.IntegerField(allow_null=True, help_text="bytes"),
                "gpu": serializers.IntegerField(allow_null=True),
            },
        )
    )
    def get_capacity(self, datacenter: Datacenter) -> dict[str, float | int | None]:
        return capacity(datacenter).as_json()


class DatacenterList(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = DatacenterSerializer

    def get_queryset(self) -> QuerySet[Datacenter]:
        return Datacenter.objects.usable_by(self.request.user).order_by("name")


def _model_rules(name: str) -> list[Any]:
    """The validators of a Datacenter field: the API checks a value exactly as the admin's form does."""
    field = Datacenter._meta.get_field(name)
    assert isinstance(field, models.Field)
    return list(field.validators)


class CapacityInput(StrictSerializer):
    """`capacity` of a PATCH: each field optional; null or "" clears it (the engine's default: the host's)."""

    # max_length as the column's: PostgreSQL refuses a longer value (SQLite would keep it), so it is a 400 here.
    cpu = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, validators=_model_rules("capacity_cpu"),
        max_length=Datacenter._meta.get_field("capacity_cpu").max_length, help_text="cores: 2, 0.5 or 500m",
    )  # fmt: skip
    memory = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, validators=_model_rules("capacity_memory"),
        max_length=Datacenter._meta.get_field("capacity_memory").max_length, help_text="bytes: 8Gi, 512Mi",
    )  # fmt: skip
    gpu = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=quantity_rules.MAX_GPUS,
        validators=_model_rules("capacity_gpu"),
    )  # fmt: skip


class DatacenterPatch(StrictSerializer):
    capacity = CapacityInput()


class DatacenterDetail(APIView):
    """`GET /api/v1/datacenters/<name>` (one you may use); `PATCH` (staff): set its capacity."""

    def get_permissions(self) -> list[Any]:
        return [IsAdminUser()] if self.request.method == "PATCH" else list(super().get_permissions())

    @extend_schema(responses=DatacenterSerializer)
    def get(self, request: Request, name: str) -> Response:
        return Response(DatacenterSerializer(_usable(request, name)).data)

    @extend_schema(request=DatacenterPatch, responses=DatacenterSerializer)
    def patch(self, request: Request, name: str) -> Response:
        datacenter = _usable(request, name)
        body = DatacenterPatch(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data["capacity"]
        for key in ("cpu", "memory"):
            if key in given:
                setattr(datacenter, f"capacity_{key}", given[key] or "")
        if "gpu" in given:
            datacenter.capacity_gpu = given["gpu"]
        # Saved as the admin saves it; the scheduler's next cycle (beat) reads it.
        datacenter.save(update_fields=["capacity_cpu", "capacity_memory", "capacity_gpu", "updated_at"])
        return Response(DatacenterSerializer(datacenter).data)


def _usable(request: Request, name: str) -> Datacenter:
    datacenter = Datacenter.objects.usable_by(request.user).filter(name=name[:100]).first()
    if datacenter is None:
        raise exceptions.NotFound(f"datacenter {name[:100]!r} not found")
    return datacenter


def _amounts(name: str) -> serializers.Serializer:  # type: ignore[type-arg]
    return inline_serializer(
        name,
        {
            "cpu": serializers.FloatField(),
            "memory": serializers.IntegerField(),
            "gpu": serializers.IntegerField(),
            "jobs": serializers.IntegerField(),
            "storage": serializers.IntegerField(),
            "storage_files": serializers.IntegerField(),
        },
    )


QUOTA_REPORT = inline_serializer(
    "QuotaReport",
    {"datacenter": serializers.CharField(), "limits": _amounts("QuotaLimits"), "usage": _amounts("QuotaUsage")},
)


class QuotaView(APIView):
    """Limits and usage in every datacenter the user may use (or one, with ?datacenter=)."""

    @extend_schema(
        parameters=[OpenApiParameter("datacenter", str, required=False)],
        responses=inline_serializer("QuotaReports", {"results": serializers.ListField(child=QUOTA_REPORT)}),
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("datacenter")
        if name is not None:
            datacenters = [usable_datacenter(request.user, name)]
        else:
            datacenters = list(Datacenter.objects.usable_by(request.user))
        return Response({"results": [quota.report(request.user, dc) for dc in datacenters]})


class QuotaSerializer(StrictModelSerializer):
    class Meta:
        model = Quota
        fields = ["cpu", "memory", "gpu", "jobs", "storage", "storage_files"]
        # The quantity fields are checked by the model's validators (the bounded parser of the contract).
        extra_kwargs = {"gpu": {"max_value": quantity_rules.MAX_GPUS}}


class QuotaAdminView(APIView):
    """Operators: PUT /api/v1/quota/<datacenter>/<username> sets a user's override (blank = default)."""

    permission_classes = [IsAdminUser]

    def _target(self, datacenter: str, username: str) -> tuple[Datacenter, Any]:
        dc = Datacenter.objects.filter(name=datacenter).first()
        if dc is None:
            raise exceptions.NotFound(f"datacenter {datacenter!r} not found")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise exceptions.NotFound(f"user {username!r} not found")
        return dc, user

    @extend_schema(responses=QUOTA_REPORT)
    def get(self, request: Request, datacenter: str, username: str) -> Response:
        dc, user = self._target(datacenter, username)
        return Response(quota.report(user, dc))

    @extend_schema(request=QuotaSerializer, responses=QUOTA_REPORT)
    def put(self, request: Request, datacenter: str, username: str) -> Response:
        dc, user = self._target(datacenter, username)
        instance = Quota.objects.filter(user=user, datacenter=dc).first() or Quota(user=user, datacenter=dc)
        serializer = QuotaSerializer(instance, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        return Response(quota.report(user, dc))
