"""Image builds API: create (or a dry run), list, get, cancel, and the builder's log by cursor."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from paddlecloud.contract.imageref import MAX_REFERENCE
from paddlecloud.contract.quantity import quote
from rest_framework import exceptions, generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.params import by_state, flag
from core.api.serializers import StrictSerializer
from images import builder, services
from images.models import ACTIVE_BUILD_STATES, BuildState, ImageBuild


class BuildRequestSerializer(StrictSerializer):
    package = serializers.CharField(max_length=4096, help_text="The package folder: /pfs/<dc>/home/<you>/...")
    image = serializers.CharField(max_length=MAX_REFERENCE, help_text="Where to push: host[:port]/path:tag.")
    registry = serializers.CharField(max_length=63, help_text="Your registry secret to push (and pull the base) with.")
    base_image = serializers.CharField(
        max_length=MAX_REFERENCE, required=False, allow_blank=True, help_text="Default: the datacenter's cpu_image."
    )
    datacenter = serializers.CharField(max_length=40, required=False, allow_blank=True)


class ImageBuildSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    owner = serializers.CharField(source="owner.username")
    datacenter = serializers.CharField(source="datacenter.name")
    url = serializers.SerializerMethodField()
    log_url = serializers.SerializerMethodField()

    class Meta:
        model = ImageBuild
        fields = [
            "uid",
            "owner",
            "datacenter",
            "package",
            "base_image",
            "image",
            "registry",
            "state",
            "message",
            "digest",
            "url",
            "log_url",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_url(self, build: ImageBuild) -> str:
        return f"{settings.PADDLECLOUD_PUBLIC_URL.rstrip('/')}/api/v1/images/{build.uid}"

    def get_log_url(self, build: ImageBuild) -> str:
        return f"{self.get_url(build)}/log"


class DryRunBuildSerializer(ImageBuildSerializer):
    class Meta(ImageBuildSerializer.Meta):
        fields = ["owner", "datacenter", "package", "base_image", "image", "registry", "state"]


def builds_visible_to(request: Request) -> QuerySet[ImageBuild]:
    everyone = bool(request.user.is_staff) and flag(request, "all")
    return ImageBuild.objects.select_related("owner", "datacenter").visible_to(request.user, everyone)


def get_build(request: Request, uid: str) -> ImageBuild:
    build = builds_visible_to(request).filter(uid=uid[:40]).first()
    if build is None:
        raise exceptions.NotFound(f"image build {quote(uid)} not found")
    return build


class BuildListCreate(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = ImageBuildSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, required=False, enum=BuildState.values),
            OpenApiParameter("active", bool, required=False, description="1: only queued and building"),
            OpenApiParameter("all", bool, required=False, description="operators: every user's builds"),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[ImageBuild]:
        builds = by_state(builds_visible_to(self.request), self.request, BuildState.values, ACTIVE_BUILD_STATES)
        return builds.order_by("-created_at")

    @extend_schema(
        request=BuildRequestSerializer,
        parameters=[
            OpenApiParameter(
                "dry_run",
                bool,
                required=False,
                description="1: check everything a build request checks; create nothing",
            )
        ],
        responses={201: ImageBuildSerializer, 200: DryRunBuildSerializer},
    )
    def post(self, request: Request) -> Response:
        dry_run = flag(request, "dry_run")
        serializer = BuildRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        checked = services.check(request.user, dict(serializer.validated_data))  # type: ignore[arg-type]
        if dry_run:
            return Response({"dry_run": True, "build": DryRunBuildSerializer(services.unsaved(checked)).data})
        build = services.create(checked)
        build = ImageBuild.objects.select_related("owner", "datacenter").get(pk=build.pk)
        return Response(ImageBuildSerializer(build).data, status=status.HTTP_201_CREATED)


class BuildDetail(APIView):
    @extend_schema(responses=ImageBuildSerializer)
    def get(self, request: Request, uid: str) -> Response:
        return Response(ImageBuildSerializer(get_build(request, uid)).data)

    @extend_schema(
        responses=ImageBuildSerializer, description="Cancel a queued or running build (a finished one stays)."
    )
    def delete(self, request: Request, uid: str) -> Response:
        build = get_build(request, uid)
        services.cancel(build)
        return Response(ImageBuildSerializer(build).data)


class BuildLog(APIView):
    """The builder's log after `cursor` and the next cursor (the shape of a job's log)."""

    @extend_schema(
        parameters=[OpenApiParameter("cursor", str, description="from the previous answer; empty: from the start")],
        responses=inline_serializer(
            "BuildLogText",
            {
                "build": serializers.CharField(),
                "text": serializers.CharField(),
                "cursor": serializers.CharField(),
                "complete": serializers.BooleanField(),
                "state": serializers.ChoiceField(BuildState.choices),
            },
        ),
    )
    def get(self, request: Request, uid: str) -> Response:
        build = get_build(request, uid)
        chunk = builder.read_log(build, request.query_params.get("cursor", ""))
        return Response(
            {
                "build": build.uid,
                "text": chunk.text,
                "cursor": chunk.cursor,
                "complete": chunk.complete,
                "state": build.state,
            }
        )
