"""Usage API: GET /api/v1/usage, the ledger summed per user, team or day over a window, as JSON or CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import quote
from core.api.renderers import JSONRenderer
from core.api.serializers import StrictSerializer
from core.errors import Forbidden, Invalid
from datacenters.models import Datacenter
from jobs.scheduling import accounting

CSV = "text/csv"


class CSVRenderer(BaseRenderer):
    """Passes on the CSV text the view wrote (errors are always rendered as JSON: see UsageView)."""

    media_type = CSV
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return str(data).encode(self.charset)


class UsageQuery(StrictSerializer):
    datacenter = serializers.CharField(
        required=False, max_length=40, help_text="Only this datacenter (default: every datacenter)."
    )
    since = serializers.CharField(
        required=False, max_length=accounting.MAX_DATE_TEXT,
        help_text="Start of the window: YYYY-MM-DD (UTC) or an ISO 8601 time; default 30 days before `until`.",
    )  # fmt: skip
    until = serializers.CharField(
        required=False, max_length=accounting.MAX_DATE_TEXT,
        help_text="End of the window, excluded; default now. The window spans at most 366 days.",
    )  # fmt: skip
    group_by = serializers.ChoiceField(accounting.GROUPS, default="user")
    user = serializers.CharField(required=False, max_length=150, help_text="Operators: only this user's records.")
    format = serializers.ChoiceField(["json", "csv"], required=False, help_text="csv: a CSV download (or Accept).")


USAGE_ROW = inline_serializer(
    "UsageRow",
    {
        "key": serializers.CharField(help_text="The username, team (Django group), UTC day (YYYY-MM-DD) or job uid."),
        "cpu_core_hours": serializers.FloatField(),
        "memory_gib_hours": serializers.FloatField(),
        "gpu_hours": serializers.FloatField(),
        "jobs": serializers.IntegerField(),
        "workers": serializers.IntegerField(),
    },
)
USAGE_REPORT = inline_serializer(
    "UsageReport",
    {
        "datacenter": serializers.CharField(allow_null=True),
        "since": serializers.DateTimeField(),
        "until": serializers.DateTimeField(),
        "group_by": serializers.CharField(),
        "results": serializers.ListField(child=USAGE_ROW),
    },
)


def _datacenter(name: str | None) -> Datacenter | None:
    if name is None:
        return None
    found = Datacenter.objects.filter(name=name).first()
    if found is None:
        raise Invalid(f"unknown datacenter {quote(name)}", "datacenter")
    return found


def _scope(viewer: Any, username: str | None) -> Any:
    """The user `?user=` names: operators may name anyone; others only themselves."""
    if username is None:
        return None
    if not viewer.is_staff:
        if username != viewer.get_username():
            raise Forbidden("only operators may ask for another user's usage", "user")
        return viewer
    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise Invalid(f"unknown user {quote(username)}", "user")
    return found


def as_csv(report: dict[str, Any]) -> str:
    """The report's rows under a header row, with the window and datacenter on each row (one file reads alone)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["datacenter", "since", "until", "group_by", *accounting.COLUMNS])
    head = [report["datacenter"] or "", report["since"], report["until"], report["group_by"]]
    for row in report["results"]:
        writer.writerow([*head, *(row[column] for column in accounting.COLUMNS)])
    return out.getvalue()


class UsageView(APIView):
    """The ledger over a window: users see their own records, operators everyone's (or one user's with ?user=)."""

    renderer_classes = [JSONRenderer, CSVRenderer]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[BaseRenderer, str]:
        # CSV only for ?format=csv, or Accept: text/csv without ?format=json; anything else (and every error) JSON.
        wanted = request.query_params.get("format")
        if not force and (wanted == "csv" or (wanted is None and CSV in request.headers.get("Accept", ""))):
            return CSVRenderer(), CSV
        return JSONRenderer(), JSONRenderer.media_type

    def handle_exception(self, exc: Exception) -> Response:
        # An error answers in the one JSON shape even to a request for CSV.
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[UsageQuery],
        responses={(200, "application/json"): USAGE_REPORT, (200, CSV): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> Response:
        query = UsageQuery(data={key: request.query_params.get(key) for key in request.query_params})
        query.is_valid(raise_exception=True)
        params = query.validated_data
        datacenter = _datacenter(params.get("datacenter"))
        user = _scope(request.user, params.get("user"))
        span = accounting.window(params.get("since"), params.get("until"))
        scoped = accounting.scope(request.user, datacenter, user)
        report = {
            "datacenter": datacenter.name if datacenter else None,
            "since": span.since.isoformat().replace("+00:00", "Z"),
            "until": span.until.isoformat().replace("+00:00", "Z"),
            "group_by": params["group_by"],
            "results": accounting.usage(scoped, span, params["group_by"]),
        }
        if request.accepted_renderer.format != "csv":
            return Response(report)
        filename = f"usage-{report['datacenter'] or 'all'}-{span.since:%Y%m%d}-{span.until:%Y%m%d}.csv"
        return Response(as_csv(report), headers={"Content-Disposition": f'attachment; filename="{filename}"'})
