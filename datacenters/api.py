"""Datacenter and quota API: what a user may use, their limits and usage; operators set quotas."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from paddlecloud.contract import quantity as quantity_rules
from rest_framework import exceptions, generics, serializers
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.serializers import StrictModelSerializer
from datacenters import quota
from datacenters.models import Datacenter, Quota, usable_datacenter


class DatacenterSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Datacenter
        # Credentials and mount details stay out: users need names, engine and defaults only.
        fields = [
            "name",
            "description",
            "engine",
            "storage_kind",
            "public_path",
            "cpu_image",
            "gpu_image",
            "pending_timeout",
            "finished_ttl",
        ]


class DatacenterList(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = DatacenterSerializer

    def get_queryset(self) -> QuerySet[Datacenter]:
        return Datacenter.objects.usable_by(self.request.user).order_by("name")


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
