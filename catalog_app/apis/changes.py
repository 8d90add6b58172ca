"""Row changes between two refs (docs/changes.md): paged JSON, or one table's changes as an Arrow IPC stream."""

import io
from collections.abc import Iterator

import pyarrow as pa
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from catalog_app.apis.common import request_catalog, validated
from catalog_app.selectors.changes import changes_between
from catalog_app.selectors.refs import ref_resolve
from lakeui.api.pagination import PagedApi, PagePagination
from lakeui.errors import ApplicationError

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class ArrowStreamRenderer(BaseRenderer):
    """Chosen by `Accept: application/vnd.apache.arrow.stream` or `?format=arrow`; the view streams the body itself."""

    media_type = ARROW_STREAM
    format = "arrow"

    def render(self, data, accepted_media_type=None, renderer_context=None):  # only an error reaches it: JSON
        return JSONRenderer().render(data, "application/json", renderer_context)


class ChangesApi(PagedApi):
    renderer_classes = [JSONRenderer, ArrowStreamRenderer]

    class InputSerializer(serializers.Serializer):
        source = serializers.CharField(max_length=255, help_text="the ref the changes are against (`from`)")
        target = serializers.CharField(max_length=255, help_text="the ref whose state they lead to (`to`)")
        table = serializers.RegexField(r"^[^.\s]+\.[^.\s]+$", required=False, default="", help_text="db.table")

    class RecordSerializer(serializers.Serializer):
        table = serializers.CharField()
        change = serializers.ChoiceField(["insert", "update", "delete"])
        key = serializers.DictField(allow_null=True, help_text="the primary key's values; null without a key")
        before = serializers.DictField(allow_null=True, help_text="the row at `from` (null for an insert)")
        after = serializers.DictField(allow_null=True, help_text="the row at `to` (null for a delete)")
        changed = serializers.ListField(child=serializers.CharField(), help_text="the columns an update changed")
        commit = serializers.CharField(allow_null=True, help_text="the commit that made the change")
        merge = serializers.CharField(allow_null=True, help_text="the merge commit that brought it to `to`")
        merge_request = serializers.IntegerField(allow_null=True, help_text="the merge request of that merge")

    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        next = serializers.URLField(allow_null=True)
        previous = serializers.URLField(allow_null=True)
        source = serializers.CharField(help_text="the `from` commit")
        target = serializers.CharField(help_text="the `to` commit")
        tables = serializers.ListField(child=serializers.DictField(), help_text="each changed table with its counts")
        results = serializers.ListField(child=serializers.DictField(), help_text="RecordSerializer items")

    def finalize_response(self, request, response, *args, **kwargs):
        """An error is JSON whatever format was asked for."""
        response = super().finalize_response(request, response, *args, **kwargs)
        renderer = getattr(response, "accepted_renderer", None)
        if isinstance(response, Response) and renderer is not None and renderer.format == "arrow":
            response.accepted_renderer, response.accepted_media_type = JSONRenderer(), "application/json"
        return response

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True), OpenApiParameter("to", str, required=True),
            OpenApiParameter("table", str, description="only this table (`db.table`); required for Arrow"),
            OpenApiParameter("page", int), OpenApiParameter("page_size", int),
        ],
        responses={200: OutputSerializer, (200, ARROW_STREAM): OpenApiTypes.BINARY},
        description="Row changes of `to`'s state against `from`'s, per changed table: keyed tables one record per "
        "changed key, keyless ones inserted and deleted rows as a multiset; each naming the commit that made it and "
        "the merge (and merge request) that brought it. With `Accept: application/vnd.apache.arrow.stream` (or "
        "`?format=arrow`) and a `table`, the table's whole change stream as Arrow IPC.",
    )  # fmt: skip
    def get(self, request, catalog):
        params = request.query_params
        given = {"source": params.get("from"), "target": params.get("to"), "table": params.get("table")}
        data = validated(self.InputSerializer, {k: v for k, v in given.items() if v is not None})
        found = request_catalog(request, catalog)
        arrow = request.accepted_renderer.format == "arrow"
        if arrow and not data["table"]:
            raise ApplicationError("table_required", "The Arrow stream is one table's: name it with table=db.table.")
        source, target = (ref_resolve(catalog=found, ref=data[side]) for side in ("source", "target"))
        feed = changes_between(source=source, target=target, table=data["table"])
        if arrow:
            return StreamingHttpResponse(_arrow_stream(feed), content_type=ARROW_STREAM)
        return feed_page(request, self, feed)


def feed_page(request, view, feed, **more) -> Response:
    """One page of a change feed as JSON: the records, the two commits, each changed table with its counts (and
    `more`, a subscription's token)."""
    paginator = PagePagination()
    page = paginator.paginate_queryset(feed, request, view=view)
    response = paginator.get_paginated_response(page)
    response.data = {
        "count": response.data["count"], "next": response.data["next"], "previous": response.data["previous"],
        "source": feed.source, "target": feed.target, "tables": [t.describe() for t in feed.tables], **more,
        "results": response.data["results"],
    }  # fmt: skip
    feed.keep()
    return response


class _Chunks(io.RawIOBase):
    """What an Arrow writer wrote since it was last taken: the stream is sent a batch at a time."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> list[bytes]:
        """The parts as written (a batch's buffers): sent as they are, not joined into one more copy."""
        taken, self.parts = self.parts, []
        return taken


def _arrow_stream(feed) -> Iterator[bytes]:
    """The one table's changes as an Arrow IPC stream, a batch at a time (a table with no change: no batch, and a
    schema of `_change` alone when the table did not change at all)."""
    sink = _Chunks()
    schema = feed.tables[0].arrow_schema() if feed.tables else pa.schema([("_change", pa.string())])
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in feed.tables[0].arrow_batches() if feed.tables else ():
            writer.write_batch(batch)
            yield from sink.take()
    yield from sink.take()
    feed.keep()
