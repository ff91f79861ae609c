"""API endpoints that belong to no single app: version."""

from __future__ import annotations

from typing import Any

import django
import paddlecloud
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class VersionView(APIView):
    """Public on purpose: clients check compatibility before they log in."""

    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []

    @extend_schema(
        responses=inline_serializer(
            "Version",
            {"version": serializers.CharField(), "api": serializers.CharField(), "django": serializers.CharField()},
        )
    )
    def get(self, request: Request) -> Response:
        return Response({"version": paddlecloud.__version__, "api": "v1", "django": django.get_version()})
