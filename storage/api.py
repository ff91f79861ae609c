"""PFS API under /api/v1/files/: ls, stat, mkdir, rm, download (Range), chunked resumable uploads.

Views stay thin: access and paths are decided in storage.paths, the work is done in storage.files and
storage.uploads, and what the pages do too comes from storage.services; the Range header is read by
storage.http_range and chunk bodies by storage.gunicorn_body. Paths are logical
(/pfs/<dc>/home/<user>/..., /pfs/<dc>/public/...).
"""

from __future__ import annotations

import re
from typing import Any

from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import http_date
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import streams
from core.api.errors import quote
from core.api.pagination import PageQuery, Pagination
from core.api.serializers import StrictSerializer
from core.errors import Invalid
from storage import files, services, upload_chunks, uploads
from storage.checksums import format_checksum
from storage.descriptors import PIECE
from storage.gunicorn_body import request_body
from storage.http_range import FileSlice, parse_range
from storage.models import Upload, UploadState

PATH_HELP = "Logical path: /pfs/<datacenter>/home/<user>/... or /pfs/<datacenter>/public/..."


class PathQuery(StrictSerializer):
    path = serializers.CharField(trim_whitespace=False, help_text=PATH_HELP)


class ListQuery(PathQuery, PageQuery):
    recursive = serializers.BooleanField(default=False)


def _query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:  # type: ignore[type-arg]
    serializer = serializer_class(data={key: request.query_params.get(key) for key in request.query_params})
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


ENTRY = inline_serializer(
    "FileEntry",
    {
        "path": serializers.CharField(),
        "name": serializers.CharField(),
        "kind": serializers.ChoiceField(["file", "dir", "symlink", "other"]),
        "size": serializers.IntegerField(),
        "mtime": serializers.DateTimeField(),
    },
)


def _page_of(name: str, item: Any) -> Any:
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializers.ListField(child=item),
        },
    )


class ListView(APIView):
    """List a directory (or one file), sorted by name; recursive lists the whole tree, depth first."""

    @extend_schema(parameters=[ListQuery], responses=_page_of("FileEntryPage", ENTRY))
    def get(self, request: Request) -> Response:
        query = _query(ListQuery, request)
        listing = services.open_folder(request.user, query["path"], query["recursive"]).listing
        paginator = Pagination()
        page: list[Any] | None = paginator.paginate_queryset(listing, request, view=self)
        return paginator.get_paginated_response(page)


class StatView(APIView):
    @extend_schema(parameters=[PathQuery], responses=ENTRY)
    def get(self, request: Request) -> Response:
        return Response(files.stat_path(request.user, _query(PathQuery, request)["path"]))


class MkdirRequest(StrictSerializer):
    path = serializers.CharField(trim_whitespace=False, help_text=PATH_HELP)
    parents = serializers.BooleanField(default=False, help_text="Create missing parents; no error if it exists.")


class MkdirView(APIView):
    @extend_schema(request=MkdirRequest, responses={201: ENTRY, 200: ENTRY})
    def post(self, request: Request) -> Response:
        body = MkdirRequest(data=request.data)
        body.is_valid(raise_exception=True)
        entry, created = files.mkdir(request.user, body.validated_data["path"], body.validated_data["parents"])
        return Response(entry, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RemoveRequest(StrictSerializer):
    path = serializers.CharField(trim_whitespace=False, help_text=PATH_HELP)
    recursive = serializers.BooleanField(default=False, help_text="Required to remove a directory.")


class RemoveView(APIView):
    @extend_schema(
        request=RemoveRequest,
        responses=inline_serializer(
            "Removed",
            {
                "path": serializers.CharField(),
                "removed_bytes": serializers.IntegerField(),
                "removed_entries": serializers.IntegerField(),
            },
        ),
    )
    def post(self, request: Request) -> Response:
        body = RemoveRequest(data=request.data)
        body.is_valid(raise_exception=True)
        removed = files.remove(request.user, body.validated_data["path"], body.validated_data["recursive"])
        return Response({"path": removed.path, "removed_bytes": removed.bytes, "removed_entries": removed.entries})


# --- download ---------------------------------------------------------------------------------


class DownloadView(APIView):
    """The file's bytes, streamed (never whole in memory); one `Range: bytes=a-b` gives a 206; a 429 past the
    user's downloads at once (core/streams.py)."""

    held_per_user = True  # the schema lists its 429

    @extend_schema(
        parameters=[PathQuery, OpenApiParameter("Range", str, OpenApiParameter.HEADER, required=False)],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (206, "application/octet-stream"): OpenApiTypes.BINARY,
        },
    )
    def get(self, request: Request) -> HttpResponseBase:
        download = files.open_download(request.user, _query(PathQuery, request)["path"])
        size = download.size
        etag = f'"{size:x}-{download.mtime_ns:x}"'
        wanted: tuple[int, int] | bool | None = None
        header = request.headers.get("Range")
        if header and request.headers.get("If-Range", etag) == etag:
            wanted = parse_range(header, size)
        if wanted is False:
            download.handle.close()
            response = HttpResponse(status=status.HTTP_416_REQUESTED_RANGE_NOT_SATISFIABLE)
            response["Content-Range"] = f"bytes */{size}"
            response["Accept-Ranges"] = "bytes"
            return response
        start, end = wanted if isinstance(wanted, tuple) else (0, size - 1)
        length = end - start + 1 if size else 0
        streamed = FileResponse(
            FileSlice(download.handle, start, length),
            as_attachment=True,
            filename=download.name,
            content_type="application/octet-stream",  # never rendered as HTML from the portal's origin
        )
        streamed.block_size = PIECE
        streamed["Content-Length"] = str(length)
        streamed["Accept-Ranges"] = "bytes"
        streamed["ETag"] = etag
        streamed["Last-Modified"] = http_date(download.mtime_ns / 1e9)
        if isinstance(wanted, tuple):
            streamed.status_code = status.HTTP_206_PARTIAL_CONTENT
            streamed["Content-Range"] = f"bytes {start}-{end}/{size}"
        if not streams.hold(streamed, request.user):
            download.handle.close()  # not streamed.close(): that ends the request (request_finished) early
            raise exceptions.Throttled(streams.RETRY_AFTER_SECONDS, detail=streams.refusal())
        return streamed


# --- uploads ----------------------------------------------------------------------------------


class UploadStart(StrictSerializer):
    path = serializers.CharField(trim_whitespace=False, help_text=PATH_HELP)
    size = serializers.IntegerField(min_value=0, max_value=2**62, help_text="Total size in bytes.")
    checksum = serializers.CharField(help_text="Whole file: 'xxh3_128:' and 32 hex digits (XXH3 128-bit).")
    chunk_size = serializers.IntegerField(
        required=False, min_value=1, help_text="Bytes per chunk, a multiple of 65536; the portal's default if left out."
    )


class UploadListQuery(StrictSerializer, PageQuery):
    path = serializers.CharField(required=False, trim_whitespace=False)
    state = serializers.ChoiceField(UploadState.choices, required=False)


def upload_json(upload: Upload, report: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(upload.id),
        "path": upload.path,
        "size": upload.size,
        "checksum": format_checksum(upload.checksum),
        "chunk_size": upload.chunk_size,
        "chunks": upload.chunk_count,
        "state": upload.state,
        "error": upload.error,
        "created_at": upload.created_at,
        "updated_at": upload.updated_at,
        "expires_at": uploads.expires_at(upload),
    }
    if report is not None:
        data.update(report)
    return data


UPLOAD = inline_serializer(
    "Upload",
    {
        "id": serializers.UUIDField(),
        "path": serializers.CharField(),
        "size": serializers.IntegerField(),
        "checksum": serializers.CharField(),
        "chunk_size": serializers.IntegerField(),
        "chunks": serializers.IntegerField(),
        "state": serializers.ChoiceField(UploadState.choices),
        "error": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
        "expires_at": serializers.DateTimeField(allow_null=True),
        # Chunk reports: lists answer only `received`, complete answers none of them.
        "received": serializers.IntegerField(required=False),
        "present": serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()), required=False),
        "wrong": serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()), required=False),
        "missing": serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()), required=False),
    },
)


class UploadListView(APIView):
    """POST starts an upload; GET lists the user's uploads (filter by ?path= and ?state=)."""

    @extend_schema(parameters=[UploadListQuery], responses=_page_of("UploadPage", UPLOAD))
    def get(self, request: Request) -> Response:
        query = _query(UploadListQuery, request)
        found = services.uploads_of(request.user, query.get("path"), query.get("state"))
        paginator = Pagination()
        page = paginator.paginate_queryset(found, request, view=self) or []
        return paginator.get_paginated_response(
            [upload_json(upload, {"received": upload.received}) for upload in page]
        )

    @extend_schema(request=UploadStart, responses={201: UPLOAD})
    def post(self, request: Request) -> Response:
        body = UploadStart(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        upload = uploads.start(request.user, data["path"], data["size"], data["checksum"], data.get("chunk_size"))
        return Response(upload_json(upload, upload_chunks.report(upload)), status=status.HTTP_201_CREATED)


class UploadDetailQuery(StrictSerializer):
    verify = serializers.BooleanField(default=False, help_text="Re-read every chunk and check its checksum.")


class UploadDetailView(APIView):
    """GET: state and which chunks are present, wrong or missing (?verify=1 re-reads them); DELETE aborts."""

    @extend_schema(parameters=[UploadDetailQuery], responses=UPLOAD)
    def get(self, request: Request, upload_id: str) -> Response:
        verify = _query(UploadDetailQuery, request)["verify"]
        upload = uploads.get_upload(request.user, upload_id)
        return Response(upload_json(upload, upload_chunks.report(upload, verify=verify)))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, upload_id: str) -> Response:
        uploads.abort(request.user, upload_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


_INDEX = re.compile(r"[0-9]{1,18}")


def chunk_index(text: str) -> int:
    """The chunk number in the URL: a whole number from 0 (a 400 naming `index` otherwise)."""
    if not _INDEX.fullmatch(text):
        raise Invalid(f"must be a whole number from 0 (got {quote(text)})", "index")
    return int(text)


class UploadChunkView(APIView):
    """PUT the raw bytes of chunk <index> (offset index * chunk_size) with `X-Chunk-Checksum: xxh3_128:<hex>`."""

    parser_classes: list[Any] = []  # the body is streamed to disk, never parsed

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter("X-Chunk-Checksum", str, OpenApiParameter.HEADER, required=True),
            OpenApiParameter("index", int, OpenApiParameter.PATH, description="Chunk number, from 0."),
        ],
        responses=inline_serializer(
            "ChunkReceived",
            {
                "index": serializers.IntegerField(),
                "size": serializers.IntegerField(),
                "checksum": serializers.CharField(),
            },
        ),
    )
    def put(self, request: Request, upload_id: str, index: str) -> Response:
        number = chunk_index(index)
        length_header = request.headers.get("Content-Length")
        try:
            length = int(length_header) if length_header not in (None, "") else None
        except ValueError:
            length = -1
        upload = uploads.put_chunk(
            request.user,
            upload_id,
            number,
            request_body(request._request),
            length,
            request.headers.get("X-Chunk-Checksum", ""),
        )
        return Response(
            {
                "index": number,
                "size": upload.chunk_length(number),
                "checksum": request.headers.get("X-Chunk-Checksum"),
            }
        )


class UploadCompleteView(APIView):
    """Verify the whole-file checksum and move the file into place: 200 done, 202 verifying in the background."""

    @extend_schema(request=None, responses={200: UPLOAD, 202: UPLOAD})
    def post(self, request: Request, upload_id: str) -> Response:
        upload = services.complete_upload(request.user, upload_id)
        code = status.HTTP_200_OK if upload.state == UploadState.COMPLETED else status.HTTP_202_ACCEPTED
        upload.refresh_from_db()
        return Response(upload_json(upload), status=code)
