"""Search a worker's whole log: GET /api/v1/jobs/<name>/logs/search?worker=&q=&from= (jobs/follow/log_search.py)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.jobs import job_and_worker
from jobs.follow import log_search

MAX_FROM = 1 << 62


class JobLogSearch(APIView):
    """The lines of one worker's log that hold `q` (case-insensitive), each with its byte offset: pass an offset as
    the logs API's `cursor` to read from that line. At most 100 lines, 512 MiB or 2 s a request; `next` goes on."""

    @extend_schema(
        parameters=[
            OpenApiParameter("worker", str, description="trainer-0 (default), pserver-1, ..."),
            OpenApiParameter("q", str, required=True, description=f"the text, 1 to {log_search.MAX_QUERY} characters"),
            OpenApiParameter("from", int, description="byte offset to search from (a previous answer's `next`)"),
        ],
        responses=inline_serializer(
            "LogSearch",
            {
                "job": serializers.CharField(),
                "worker": serializers.CharField(),
                "matches": inline_serializer(
                    "LogMatch",
                    {
                        "offset": serializers.IntegerField(help_text="where the line starts: a logs API cursor"),
                        "line": serializers.CharField(help_text="the line (a long one around the match)"),
                    },
                    many=True,
                ),
                "next": serializers.IntegerField(
                    allow_null=True, help_text="search on from here (`from`); null: the log's end was reached"
                ),
                "searched": serializers.IntegerField(help_text="bytes read by this request"),
                "size": serializers.IntegerField(help_text="the log's size when it was searched"),
            },
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        job, worker = job_and_worker(request, name)
        query = request.query_params.get("q", "")
        if not 1 <= len(query) <= log_search.MAX_QUERY:
            raise exceptions.ValidationError({"q": [f"must be 1 to {log_search.MAX_QUERY} characters"]})
        start = request.query_params.get("from", "0")
        if not (start.isascii() and start.isdigit() and len(start) <= 19 and int(start) <= MAX_FROM):
            raise exceptions.ValidationError({"from": ["must be a byte offset: a whole number, 0 or more"]})
        found = log_search.search(job, worker, query, int(start))
        if found is None:
            raise exceptions.NotFound(f"{worker} has written no log on the shared filesystem yet")
        answer = {"job": job.name, "worker": worker, "matches": found.matches, "next": found.next}
        return Response({**answer, "searched": found.searched, "size": found.size})
