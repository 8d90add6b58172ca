"""What every catalog endpoint shares: finding the catalog and ref, time travel, the write target."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from catalog_app.apis.permissions import CHECKED_CATALOG
from catalog_app.models import Catalog
from catalog_app.selectors.refs import Chain, ResolvedRef, catalog_get, ref_resolve
from catalog_app.selectors.refs import timestamp_parse as parse_at
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import WriteTarget
from lakeui.api.conditional import KNOWN_REF, commit_read, head_read
from lakeui.errors import ApplicationError

AT_PARAMETER = OpenApiParameter("at", str, description="ISO 8601 timestamp: read the ref as it was then (time travel)")
IF_MATCH_PARAMETER = OpenApiParameter(
    "If-Match", str, location=OpenApiParameter.HEADER,
    description="The branch head the change was based on; if the branch has moved since, the write is a 409",
)  # fmt: skip


def validated(serializer_class: type[serializers.Serializer], data) -> dict:
    """The body as a view's input serializer reads it; a 400 with the fields' errors if it does not."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def created(instance, serializer_class: type[serializers.Serializer]) -> Response:
    return Response(serializer_class(instance).data, status=status.HTTP_201_CREATED)


def request_catalog(request: Request, name: str) -> Catalog:
    """The catalog a request names: the one the permission check read (apis/permissions.py), not read again."""
    checked = getattr(request, CHECKED_CATALOG, None)
    return checked if checked is not None and checked.name == name else catalog_get(name=name)


def read_ref(request: Request, catalog: str, ref: str) -> ResolvedRef:
    """The ref a read names; the answer is the state at its commit, so a client holding it gets a 304 (or the
    answer already made for that commit) now, before any object is read."""
    at = parse_at(request.query_params.get("at"))
    known = getattr(request, "_request", request).__dict__.pop(KNOWN_REF, None)  # catalog_app/middleware.py
    resolved = None
    if known is not None and at is None and known[:2] == (catalog, ref):
        resolved = known[2].resolved(ref)  # as ref_resolve finds it, read with the token: no query
    if resolved is None or resolved.catalog is not request_catalog(request, catalog):
        resolved = ref_resolve(catalog=request_catalog(request, catalog), ref=ref, at=at)
    if resolved.kind == "branch" and at is None:
        head_read(request, commit_id=resolved.commit.id, line=resolved.commit.line_id, seq=resolved.commit.seq)
    commit_read(request, resolved.commit.id)
    return resolved


def read_chain(request: Request, catalog: str, ref: str) -> Chain:
    return read_ref(request, catalog, ref).chain


def write_target(request: Request, catalog: str | Catalog, branch: str) -> WriteTarget:
    if request.query_params.get("at"):
        raise ApplicationError("read_only_ref", "A ref at a point in time is read-only; write to the branch.")
    message = request.data.get("message", "") if isinstance(request.data, dict) else ""
    if not isinstance(message, str):
        raise ApplicationError("invalid_input", "message must be a string.")
    found = catalog if isinstance(catalog, Catalog) else request_catalog(request, catalog)
    # Checked here too (commit_begin checks every commit) so a data job into a protected branch is refused with
    # 403 before it is enqueued.
    branch_write_check(catalog=found, branch=branch)
    return WriteTarget(
        catalog=found,
        branch=branch,
        author=request.user,
        expected_head=request.headers.get("If-Match", "").strip('"') or None,
        message=message[:2000],
    )


class UserField(serializers.CharField):
    def to_representation(self, value):
        return value.username if value is not None else None


DATETIME = serializers.DateTimeField()  # one field to write times as every serializer does


class CommitOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    seq = serializers.IntegerField()
    parent = serializers.CharField(source="parent_id", allow_null=True)
    merge_parent = serializers.CharField(source="merge_parent_id", allow_null=True)
    created_at = serializers.DateTimeField()
    author = UserField(allow_null=True)
    message = serializers.CharField()

    def to_representation(self, commit) -> dict:
        """The fields above, written directly: a log page of 50 commits cost more in the fields' machinery than in
        its query (tests/catalog_app/test_cold_reads.py compares with the fields' answer)."""
        return {
            "id": commit.id,
            "seq": commit.seq,
            "parent": commit.parent_id,
            "merge_parent": commit.merge_parent_id,
            "created_at": DATETIME.to_representation(commit.created_at),
            "author": commit.author.username if commit.author_id is not None else None,
            "message": commit.message,
        }


class WriteInputSerializer(serializers.Serializer):
    message = serializers.CharField(required=False, allow_blank=True, max_length=2000, help_text="Commit message")


class CommitIdOutputSerializer(serializers.Serializer):
    commit = serializers.CharField(source="id")
