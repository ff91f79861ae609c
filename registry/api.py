"""Registry secret API: list, create, delete. The password is write-only and never answered."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from rest_framework import exceptions, mixins, serializers, viewsets

from core.api.serializers import StrictModelSerializer
from core.errors import Conflict
from registry.models import RegistrySecret


class RegistrySecretSerializer(StrictModelSerializer):
    password = serializers.CharField(
        write_only=True, trim_whitespace=False, max_length=4096, style={"input_type": "password"}
    )

    class Meta:
        model = RegistrySecret
        fields = ["name", "server", "username", "password", "created_at"]
        read_only_fields = ["created_at"]
        # Uniqueness per owner is checked in create(): the owner is not a field of the request.
        validators: list[object] = []

    def validate_server(self, value: str) -> str:
        return value.strip()


class RegistrySecretViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = RegistrySecretSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[RegistrySecret]:
        return RegistrySecret.objects.filter(owner_id=self.request.user.pk).order_by("name")

    def get_object(self) -> RegistrySecret:
        name = self.kwargs["name"]
        secret = self.get_queryset().filter(name=name).first()
        if secret is None:
            raise exceptions.NotFound(f"registry secret {name!r} not found")
        return secret

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:  # type: ignore[type-arg]
        name = serializer.validated_data["name"]
        try:
            with transaction.atomic():
                serializer.save(owner=self.request.user)
        except IntegrityError:
            raise Conflict(f"you already have a registry secret named {name!r}", "name") from None
