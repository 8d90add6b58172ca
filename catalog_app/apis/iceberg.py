"""The Iceberg REST catalog at `/iceberg/{catalog}/{ref}/v1/...`: namespaces are the ref's databases, tables its
tables; a table's metadata is LakeUI's state written as Iceberg (catalog_app/iceberg/services.py). At a branch it
takes writes (catalog_app/iceberg/commits.py); a tag or a commit id answers 403. The bearer token is the LakeUI API
token and the roles are the API's (viewer reads, editor writes; a protected branch takes no direct commit). Every
error is Iceberg's `{"error": {"message", "type", "code"}}`; what is not served answers 406
`UnsupportedOperationException`.
"""

import json
import logging
import re

from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog
from catalog_app.iceberg import requests
from catalog_app.iceberg.commits import (
    TableCommitRequest,
    iceberg_branch,
    iceberg_table_at_branch,
    iceberg_table_stage,
    iceberg_tables_commit,
    loaded_for_branch,
    table_spec,
)
from catalog_app.iceberg.events import iceberg_events, token_parsed
from catalog_app.iceberg.register import iceberg_table_register
from catalog_app.iceberg.selectors import (
    iceberg_ref,
    namespace_get,
    namespace_list,
    namespace_table_get,
    namespace_table_list,
)
from catalog_app.iceberg.services import iceberg_table_load
from catalog_app.models import Role
from catalog_app.selectors.refs import ResolvedRef
from catalog_app.selectors.token_reads import REF, token_read
from catalog_app.services.commits import WriteTarget
from catalog_app.services.databases import database_create, database_drop
from catalog_app.services.tables import table_create, table_drop, table_update
from lakeui.api.authentication import QuickTokenAuthentication
from lakeui.api.conditional import KNOWN_ACCESS, KNOWN_REF, TOKEN_USER
from lakeui.errors import ApplicationError

logger = logging.getLogger(__name__)

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # database and table names (catalog_app/names.py)
SEPARATOR = "\x1f"  # between the levels of a namespace in a path
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/events",
]
# LakeUI's error codes as Iceberg's error types (by status otherwise).
ERROR_TYPES = {
    "table_not_found": "NoSuchTableException",
    "database_not_found": "NoSuchNamespaceException",
    "iceberg_not_representable": "UnsupportedOperationException",
    "name_exists": "AlreadyExistsException",
    "database_not_empty": "NamespaceNotEmptyException",
    "commit_failed": "CommitFailedException",
}
STATUS_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    406: "UnsupportedOperationException",
    409: "CommitFailedException",
}
MESSAGE_UNSERVED = "This Iceberg catalog serves {method} {path} not; it serves: {endpoints}."


def iceberg_error(message: str, type_: str, code: int) -> Response:
    return Response({"error": {"message": message, "type": type_, "code": code}}, status=code)


def iceberg_exception_handler(exc: Exception, context: dict) -> Response:
    """Iceberg's error body for every refusal; an unexpected error is logged and answered as a 500 in that body."""
    if isinstance(exc, ApplicationError):
        kind = ERROR_TYPES.get(exc.code) or STATUS_TYPES.get(exc.status, "BadRequestException")
        return iceberg_error(exc.message, kind, exc.status)
    if isinstance(exc, exceptions.MethodNotAllowed):
        return _unsupported(context["request"])
    if isinstance(exc, exceptions.APIException):
        response = iceberg_error(str(exc.detail), STATUS_TYPES.get(exc.status_code, "RESTException"), exc.status_code)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response["WWW-Authenticate"] = 'Bearer realm="lakeui"'
        return response
    logger.exception("Iceberg REST request failed", exc_info=exc)
    return iceberg_error("An unexpected error occurred; it has been logged.", "ServiceFailureException", 500)


def _unsupported(request) -> Response:
    message = MESSAGE_UNSERVED.format(method=request.method, path=request.path, endpoints=", ".join(ENDPOINTS))
    return iceberg_error(message, "UnsupportedOperationException", 406)


class BearerTokenAuthentication(QuickTokenAuthentication):
    """The LakeUI API token sent as Iceberg clients send it: `Authorization: Bearer <token>`."""

    keyword = "Bearer"


class IcebergApi(APIView):
    """What every Iceberg endpoint shares: bearer (or `Token`) authentication, Iceberg's error bodies, and the
    catalog and ref of the URI (the permission check reads the catalog with the user's role: viewer for reads)."""

    authentication_classes = [BearerTokenAuthentication, QuickTokenAuthentication]
    schema = None  # Iceberg's REST catalog spec documents these paths, not LakeUI's OpenAPI schema

    def get_exception_handler(self):
        return iceberg_exception_handler

    def initial(self, request, *args, **kwargs):
        """Before authentication: the token's user, the catalog with their role and the ref of the URI, in one query
        (`token_read`, as an API read by token does, catalog_app/middleware.py), which the authentication, the
        permission check and `resolved` then take instead of reading each again. Anything it cannot stand in for
        (no such token or ref, an inactive user) goes the normal way, which answers or refuses it."""
        keyword, _, key = request.headers.get("Authorization", "").partition(" ")
        catalog, ref = kwargs.get("catalog"), kwargs.get("ref")
        if keyword.lower() in ("bearer", "token") and key and " " not in key and catalog and ref:
            found = token_read(key=key, kind=REF, catalog=catalog, ref=ref)
            if found is not None and found.user.is_active:
                known = request._request.__dict__
                known[TOKEN_USER] = (key, found.user)
                if found.catalog is not None and found.role is not None:
                    known[KNOWN_ACCESS] = (found.user.pk, found.catalog, found.role)
                    known[KNOWN_REF] = (catalog, ref, found)
        super().initial(request, *args, **kwargs)

    def resolved(self, request, catalog: str, ref: str) -> ResolvedRef:
        known = request._request.__dict__.pop(KNOWN_REF, None)  # read with the token (`initial`)
        found = known[2].resolved(ref) if known is not None and known[:2] == (catalog, ref) else None
        if found is None or found.catalog is not request_catalog(request, catalog):
            found = iceberg_ref(catalog=request_catalog(request, catalog), ref=ref)
        return found

    def target(self, request, catalog: str, ref: str) -> WriteTarget:
        """Where a write commits: the branch the URI names (403 for a tag or a commit id), as the token's user."""
        resolved = self.resolved(request, catalog, ref)
        branch = iceberg_branch(resolved)
        return WriteTarget(catalog=request_catalog(request, catalog), branch=branch.name, author=request.user,
                           read=resolved)  # fmt: skip

    def body(self, request, model: type[requests.M]) -> tuple[requests.M, dict]:
        """The request body as the REST spec's `model` (a 400 naming the field that does not fit, before anything is
        read or written) and as the JSON object it was sent as, which the services read, its shape now known."""
        if not isinstance(request.data, dict):
            raise ApplicationError("invalid_input", "The request body must be a JSON object.")
        return requests.parsed(model, request.data), request.data


def _namespace(namespace: str) -> str:
    """A namespace of the path: one level, a database name (anything else names no namespace here)."""
    if SEPARATOR in namespace or not NAME.fullmatch(namespace):
        raise ApplicationError("database_not_found", f"Namespace does not exist: {namespace[:200]}", status=404)
    return namespace


def _table_name(namespace: str, table: str) -> str:
    if not NAME.fullmatch(table):
        raise ApplicationError("table_not_found", f"Table does not exist: {namespace}.{table[:200]}", status=404)
    return table


class IcebergConfigApi(IcebergApi):
    def get(self, request, catalog, ref):
        resolved = self.resolved(request, catalog, ref)
        return Response({
            "defaults": {},
            "overrides": {"lakeui.catalog": resolved.catalog.name, "lakeui.ref": ref,
                          "lakeui.commit": resolved.commit.id},
            "endpoints": ENDPOINTS,
        })  # fmt: skip


class IcebergNamespaceListApi(IcebergApi):
    def get(self, request, catalog, ref):
        chain = self.resolved(request, catalog, ref).chain
        parent = request.query_params.get("parent")
        if parent is not None:  # databases hold no namespaces: an existing one lists none
            namespace_get(chain, name=_namespace(parent))
            return Response({"namespaces": [], "next-page-token": None})
        return Response({"namespaces": [[db.name] for db in namespace_list(chain)], "next-page-token": None})

    def post(self, request, catalog, ref):
        body, _ = self.body(request, requests.CreateNamespaceRequest)
        if len(body.namespace) != 1:
            raise ApplicationError("invalid_input", 'A namespace is one level here: a database name, as ["name"].')
        properties = dict(body.properties or {})
        comment = properties.pop("comment", "")
        database = database_create(target=self.target(request, catalog, ref), name=body.namespace[0],
                                   properties=properties, comment=comment)  # fmt: skip
        return Response({"namespace": [database.name], "properties": body.properties or {}})


class IcebergNamespaceDetailApi(IcebergApi):
    def get(self, request, catalog, ref, namespace):
        database = namespace_get(self.resolved(request, catalog, ref).chain, name=_namespace(namespace))
        properties = {str(k): str(v) for k, v in (database.state.get("properties") or {}).items()}
        if database.state.get("comment"):
            properties["comment"] = database.state["comment"]
        return Response({"namespace": [database.name], "properties": properties})

    def head(self, request, catalog, ref, namespace):
        namespace_get(self.resolved(request, catalog, ref).chain, name=_namespace(namespace))
        return HttpResponse(status=204)

    def delete(self, request, catalog, ref, namespace):
        database_drop(target=self.target(request, catalog, ref), name=_namespace(namespace))
        return HttpResponse(status=204)


class IcebergTableListApi(IcebergApi):
    def get(self, request, catalog, ref, namespace):
        chain = self.resolved(request, catalog, ref).chain
        database = namespace_get(chain, name=_namespace(namespace))
        identifiers = [{"namespace": [database.name], "name": t.name} for t in namespace_table_list(chain,
                       database=database)]  # fmt: skip
        return Response({"identifiers": identifiers, "next-page-token": None})

    def post(self, request, catalog, ref, namespace):
        """createTable: a table of the schema's columns (ids as LakeUI numbers them, 1 up), identity partitions,
        identifier fields as the primary key; answered with its metadata and write location on the branch. With
        `stage-create`, only the metadata: a later commit asserting `assert-create` creates the table."""
        parsed, body = self.body(request, requests.CreateTableRequest)
        target = self.target(request, catalog, ref)
        if parsed.stage_create:
            staged = iceberg_table_stage(target=target, database=_namespace(namespace), body=body)
            return HttpResponse(staged, content_type="application/json")
        spec = table_spec(body)
        table = table_create(
            target=target, database=_namespace(namespace), name=parsed.name, columns=spec.columns,
            partition_by=spec.partition_by, primary_key=spec.primary_key, properties=spec.properties,
        )  # fmt: skip
        return _loaded_response(target, table)


class IcebergTableLoadApi(IcebergApi):
    """loadTable: the table's metadata at the ref, the ref's head as the `main` branch, one snapshot per commit of
    the table on the ref (time travel by snapshot id or timestamp)."""

    def get(self, request, catalog, ref, namespace, table):
        resolved = self.resolved(request, catalog, ref)
        chain = resolved.chain
        database = namespace_get(chain, name=_namespace(namespace))
        found = namespace_table_get(chain, database=database, name=_table_name(namespace, table))
        loaded = iceberg_table_load(chain, table=found)
        if resolved.kind == "branch" and resolved.branch is not None:
            body = loaded_for_branch(loaded, table=found, branch=resolved.branch)
            return HttpResponse(body, content_type="application/json")
        body = b"".join([b'{"metadata-location":', json.dumps(loaded.location).encode(), b',"metadata":',
                         loaded.metadata_json, b',"config":{}}'])  # fmt: skip
        return HttpResponse(body, content_type="application/json")

    def head(self, request, catalog, ref, namespace, table):
        chain = self.resolved(request, catalog, ref).chain
        database = namespace_get(chain, name=_namespace(namespace))
        namespace_table_get(chain, database=database, name=_table_name(namespace, table))
        return HttpResponse(status=204)

    def post(self, request, catalog, ref, namespace, table):
        """commitTable: the requirements checked and the updates applied as one LakeUI commit."""
        _, body = self.body(request, requests.CommitTableRequest)
        target = self.target(request, catalog, ref)
        change = TableCommitRequest(namespace=_namespace(namespace), name=_table_name(namespace, table),
                                    requirements=body["requirements"], updates=body["updates"])  # fmt: skip
        committed = iceberg_tables_commit(target=target, requests=[change])
        return HttpResponse(committed.table_loaded(committed.tables[0]), content_type="application/json")

    def delete(self, request, catalog, ref, namespace, table):
        table_drop(target=self.target(request, catalog, ref), database=_namespace(namespace),
                   name=_table_name(namespace, table))  # fmt: skip
        return HttpResponse(status=204)


class IcebergTableRegisterApi(IcebergApi):
    def post(self, request, catalog, ref, namespace):
        """registerTable: an Iceberg table lying under a folder tables are registered from, as a LakeUI table of the
        branch whose segments are its data files where they lie (catalog_app/iceberg/register.py)."""
        body, _ = self.body(request, requests.RegisterTableRequest)
        if body.overwrite:
            raise ApplicationError("unsupported", "register with overwrite is not served: drop the table first.",
                                   status=406)  # fmt: skip
        target = self.target(request, catalog, ref)
        table = iceberg_table_register(target=target, database=_namespace(namespace), name=body.name,
                                       metadata_location=body.metadata_location)  # fmt: skip
        return _loaded_response(target, table)


def _loaded_response(target: WriteTarget, table) -> HttpResponse:
    body = iceberg_table_at_branch(catalog=target.catalog, branch=target.branch, table=table)
    return HttpResponse(body, content_type="application/json")


def _identifier(value: requests.TableIdentifier) -> tuple[str, str]:
    if len(value.namespace) != 1:
        raise ApplicationError("invalid_input", "A table identifier is {namespace: [database], name} here.")
    return _namespace(value.namespace[0]), value.name


class IcebergTableRenameApi(IcebergApi):
    def post(self, request, catalog, ref):
        body, _ = self.body(request, requests.RenameTableRequest)
        (source_db, source), (target_db, destination) = _identifier(body.source), _identifier(body.destination)
        if source_db != target_db:
            raise ApplicationError("invalid_input", "A table is renamed within its namespace (database) here.")
        table_update(target=self.target(request, catalog, ref), database=source_db, name=source, new_name=destination)
        return HttpResponse(status=204)


class IcebergTransactionCommitApi(IcebergApi):
    """commitTransaction: every table's requirements and updates as one LakeUI commit, all or nothing."""

    def post(self, request, catalog, ref):
        parsed, body = self.body(request, requests.CommitTransactionRequest)
        target = self.target(request, catalog, ref)
        changes = []
        for change, raw in zip(parsed.table_changes, body["table-changes"], strict=True):
            namespace, name = _identifier(change.identifier)
            changes.append(TableCommitRequest(namespace=namespace, name=name, requirements=raw["requirements"],
                                              updates=raw["updates"]))  # fmt: skip
        iceberg_tables_commit(target=target, requests=changes)
        return HttpResponse(status=204)


class IcebergEventsApi(IcebergApi):
    """The catalog's events at the ref (catalog_app/iceberg/events.py): a read, so a viewer's token serves."""

    required_roles = {"POST": Role.VIEWER}
    DEFAULT_PAGE = 100

    def post(self, request, catalog, ref):
        body, _ = self.body(request, requests.QueryEventsRequest)
        page = iceberg_events(
            resolved=self.resolved(request, catalog, ref), after=token_parsed(body.continuation_token),
            page_size=body.page_size or self.DEFAULT_PAGE, after_ms=body.after_timestamp_ms,
            types=set(body.operation_types) if body.operation_types else None,
        )  # fmt: skip
        return Response({"continuation-token": page.token, "highest-processed-timestamp-ms": page.highest_ms,
                         "events": page.events})  # fmt: skip


class IcebergUnsupportedApi(IcebergApi):
    """Every other endpoint of the Iceberg REST catalog (views, metrics): not served."""

    def http_method_not_allowed(self, request, *args, **kwargs):
        return _unsupported(request)


class IcebergNotFoundApi(IcebergApi):
    """A path under /iceberg/ that names no catalog and ref."""

    def http_method_not_allowed(self, request, *args, **kwargs):
        return iceberg_error("No Iceberg catalog at this path: use /iceberg/{catalog}/{ref}/v1/.", "NotFoundException",
                             404)  # fmt: skip

    get = head = post = put = delete = patch = http_method_not_allowed
