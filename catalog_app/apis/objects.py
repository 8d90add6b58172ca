"""Databases, tables, columns, views, shares and roles at a ref. Reads take `?at=`; writes need a branch."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app import table_schema
from catalog_app.apis.blame import KEY_HISTORY_PARAMETER, key_history_answer
from catalog_app.apis.common import (
    AT_PARAMETER,
    DATETIME,
    IF_MATCH_PARAMETER,
    CommitIdOutputSerializer,
    CommitOutputSerializer,
    WriteInputSerializer,
    created,
    read_chain,
    validated,
    write_target,
)
from catalog_app.models import ObjectKind
from catalog_app.selectors.objects import (
    ObjectsAt,
    object_find,
    object_get,
    object_history,
    objects_at,
    schema_history_read,
)
from catalog_app.services import tables as table_services
from catalog_app.services.branch_objects import branch_object_create, branch_object_drop
from catalog_app.services.databases import database_create, database_drop, database_update
from lakeui.api.conditional import objects_read
from lakeui.api.pagination import PagedApi, paginated

DATABASE, TABLE, VIEW = ObjectKind.DATABASE, ObjectKind.TABLE, ObjectKind.VIEW
WRITE_DOC = {"parameters": [IF_MATCH_PARAMETER]}


def _database(chain, name, request=None):
    """The database named `name`; with `request`, noted as what its answer reads (objects_read)."""
    version = object_get(chain, kind=DATABASE, name=name)
    if request is not None:
        objects_read(request, objects=[version.object_id])
    return version


def _table(chain, database, name, request=None):
    """The table named `name` in `database`; with `request`, both noted as what its answer reads. One query: the
    database is found inside the table's (a missing one is looked for again, to say which of the two is missing)."""
    version = object_find(chain, kind=TABLE, name=name, parent_named=database)
    if version is None:
        version = object_get(chain, kind=TABLE, name=name, parent_id=_database(chain, database).object_id)
    if request is not None:
        objects_read(request, objects=[version.object_id, version.parent_id])
    return version


class VersionOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="object_id")
    name = serializers.CharField()
    commit = serializers.CharField(source="commit_id")
    updated_at = serializers.DateTimeField(source="commit.created_at")


def version_json(version) -> dict:
    """VersionOutputSerializer's fields, written directly: the database and table serializers write theirs so (a list
    of tables cost more in the fields' machinery than in its query; tests/catalog_app/test_cold_reads.py compares
    them with the fields' answer)."""
    return {
        "id": str(version.object_id),
        "name": version.name,
        "commit": version.commit_id,
        "updated_at": DATETIME.to_representation(version.commit.created_at),
    }


class DatabaseOutputSerializer(VersionOutputSerializer):
    properties = serializers.DictField(source="state.properties")
    comment = serializers.CharField(source="state.comment")

    def to_representation(self, version) -> dict:
        state = version.state
        return {**version_json(version), "properties": dict(state["properties"]),
                "comment": state["comment"]}  # fmt: skip


class ColumnSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(max_length=63)
    type = serializers.CharField(max_length=40)
    nullable = serializers.BooleanField(default=True)
    default = serializers.JSONField(required=False, allow_null=True)
    # a merge's fill by an expression (only where one settled the column): `{"expression", "columns"}`, the columns
    # it reads as they were then (docs/merge-semantics.md#schema-conflicts-in-a-resolution)
    fill = serializers.JSONField(read_only=True)


class TableOutputSerializer(VersionOutputSerializer):
    database = serializers.UUIDField(source="parent_id")
    columns = ColumnSerializer(source="state.columns", many=True)
    partition_by = serializers.SerializerMethodField()
    primary_key = serializers.SerializerMethodField()
    properties = serializers.DictField(source="state.properties")
    comment = serializers.CharField(source="state.comment")
    schema_version = serializers.IntegerField(source="state.schema_version_id")

    def get_partition_by(self, version) -> list[str]:
        return table_schema.column_names(version.state["columns"], version.state["partition_by"])

    def get_primary_key(self, version) -> list[str]:
        return table_schema.column_names(version.state["columns"], version.state["primary_key"])

    def to_representation(self, version) -> dict:
        state = version.state
        return {
            **version_json(version),
            "database": str(version.parent_id),
            "columns": [column_json(c) for c in state["columns"]],
            "partition_by": self.get_partition_by(version),
            "primary_key": self.get_primary_key(version),
            "properties": dict(state["properties"]),
            "comment": state["comment"],
            "schema_version": state["schema_version_id"],
        }


def column_json(column: dict) -> dict:
    """A column as ColumnSerializer writes it: `default` and `fill` only when the column has one."""
    out = {"id": column["id"], "name": column["name"], "type": column["type"], "nullable": column.get("nullable", True)}
    if "default" in column:
        out["default"] = column["default"]
    if column.get("fill"):
        out["fill"] = column["fill"]
    return out


class OperationOutputSerializer(serializers.Serializer):
    op = serializers.CharField()
    details = serializers.JSONField()


class SchemaVersionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    visible = serializers.BooleanField()
    commit = serializers.CharField(source="commit_id")
    created_at = serializers.DateTimeField(source="commit.created_at")
    columns = ColumnSerializer(many=True)

    def to_representation(self, version) -> dict:
        """The fields above, written directly (as the table's: a history's answer cost more in the fields' machinery
        than in its queries)."""
        return {
            "id": version.id,
            "visible": version.visible,
            "commit": version.commit_id,
            "created_at": DATETIME.to_representation(version.commit.created_at),
            "columns": [column_json(c) for c in version.columns],
        }


class HistoryEntryOutputSerializer(serializers.Serializer):
    commit = CommitOutputSerializer()
    name = serializers.CharField(source="version.name")
    dropped = serializers.BooleanField(source="version.dropped")
    operations = OperationOutputSerializer(many=True)
    schema_version = serializers.IntegerField(source="schema_version.id", allow_null=True, default=None)

    def to_representation(self, entry) -> dict:
        """The fields above, written directly (see SchemaVersionOutputSerializer)."""
        return {
            "commit": CommitOutputSerializer().to_representation(entry.commit),
            "name": entry.version.name,
            "dropped": entry.version.dropped,
            "operations": [{"op": o.op, "details": o.details} for o in entry.operations],
            "schema_version": entry.schema_version.id if entry.schema_version is not None else None,
        }


class PropertiesInputSerializer(WriteInputSerializer):
    name = serializers.CharField(required=False, max_length=63)
    set_properties = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    unset_properties = serializers.ListField(child=serializers.CharField(), required=False)


def _property_changes(data: dict) -> dict:
    """A rename and property changes read by PropertiesInputSerializer, as the update services take them."""
    return {
        "new_name": data.get("name"),
        "set_properties": data.get("set_properties"),
        "unset_properties": data.get("unset_properties"),
    }


# --- databases ------------------------------------------------------------------------------------------


class DatabaseListApi(PagedApi):
    class InputSerializer(WriteInputSerializer):
        name = serializers.CharField(max_length=63)
        properties = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
        comment = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(parameters=[AT_PARAMETER], responses=DatabaseOutputSerializer(many=True))
    def get(self, request, catalog, ref):
        objects_read(request, top=True)  # every database (and share and role: any object without a parent)
        return paginated(
            request, self, ObjectsAt(read_chain(request, catalog, ref), kind=DATABASE), DatabaseOutputSerializer
        )

    @extend_schema(request=InputSerializer, responses={201: DatabaseOutputSerializer}, **WRITE_DOC)
    def post(self, request, catalog, ref):
        data = validated(self.InputSerializer, request.data)
        data.pop("message", None)
        version = database_create(target=write_target(request, catalog, ref), **data)
        return created(version, DatabaseOutputSerializer)


class DatabaseDetailApi(APIView):
    class UpdateInputSerializer(PropertiesInputSerializer):
        comment = serializers.CharField(required=False, allow_blank=True)

    @extend_schema(parameters=[AT_PARAMETER], responses=DatabaseOutputSerializer)
    def get(self, request, catalog, ref, database):
        return Response(DatabaseOutputSerializer(_database(read_chain(request, catalog, ref), database, request)).data)

    @extend_schema(request=UpdateInputSerializer, responses=DatabaseOutputSerializer, **WRITE_DOC)
    def patch(self, request, catalog, ref, database):
        data = validated(self.UpdateInputSerializer, request.data)
        version = database_update(
            target=write_target(request, catalog, ref),
            name=database,
            **_property_changes(data),
            comment=data.get("comment"),
        )
        return Response(DatabaseOutputSerializer(version).data)

    @extend_schema(responses=CommitIdOutputSerializer, **WRITE_DOC)
    def delete(self, request, catalog, ref, database):
        cascade = request.query_params.get("cascade") in ("1", "true")
        commit = database_drop(target=write_target(request, catalog, ref), name=database, cascade=cascade)
        return Response(CommitIdOutputSerializer(commit).data)


class ObjectHistoryApi(APIView):
    """Each version of a database or table on the ref, newest first; for a table also its schema history."""

    class OutputSerializer(serializers.Serializer):
        versions = HistoryEntryOutputSerializer(many=True)
        schema_versions = SchemaVersionOutputSerializer(many=True, required=False)

    @extend_schema(parameters=[AT_PARAMETER, KEY_HISTORY_PARAMETER], responses=OutputSerializer)
    def get(self, request, catalog, ref, database, table=None):
        if table is not None and "key" in request.query_params:  # one key's versions (docs/provenance.md)
            return key_history_answer(request, catalog, ref, database, table)
        chain = read_chain(request, catalog, ref)
        current = _database(chain, database, request) if table is None else _table(chain, database, table, request)
        schemas = schema_history_read(chain, table_id=current.object_id) if table is not None else []
        history = object_history(chain, object_id=current.object_id, schemas=schemas)
        body = {"versions": HistoryEntryOutputSerializer(history, many=True).data}
        if table is not None:
            body["schema_versions"] = SchemaVersionOutputSerializer(schemas, many=True).data
        return Response(body)


# --- tables and columns ---------------------------------------------------------------------------------


class TableListApi(PagedApi):
    class InputSerializer(WriteInputSerializer):
        name = serializers.CharField(max_length=63)
        columns = ColumnSerializer(many=True)
        partition_by = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        primary_key = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        properties = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
        comment = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(parameters=[AT_PARAMETER], responses=TableOutputSerializer(many=True))
    def get(self, request, catalog, ref, database):
        chain = read_chain(request, catalog, ref)
        parent = _database(chain, database, request).object_id
        objects_read(request, children_of=[parent])
        return paginated(request, self, ObjectsAt(chain, kind=TABLE, parent_id=parent), TableOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: TableOutputSerializer}, **WRITE_DOC)
    def post(self, request, catalog, ref, database):
        data = validated(self.InputSerializer, request.data)
        data.pop("message", None)
        data["columns"] = [dict(column) for column in data["columns"]]
        version = table_services.table_create(target=write_target(request, catalog, ref), database=database, **data)
        return created(version, TableOutputSerializer)


class TableDetailApi(APIView):
    class UpdateInputSerializer(PropertiesInputSerializer):
        partition_by = serializers.ListField(child=serializers.CharField(), required=False)

    @extend_schema(parameters=[AT_PARAMETER], responses=TableOutputSerializer)
    def get(self, request, catalog, ref, database, table):
        return Response(TableOutputSerializer(_table(read_chain(request, catalog, ref), database, table, request)).data)

    @extend_schema(request=UpdateInputSerializer, responses=TableOutputSerializer, **WRITE_DOC)
    def patch(self, request, catalog, ref, database, table):
        data = validated(self.UpdateInputSerializer, request.data)
        version = table_services.table_update(
            target=write_target(request, catalog, ref),
            database=database,
            name=table,
            **_property_changes(data),
            partition_by=data.get("partition_by"),
        )
        return Response(TableOutputSerializer(version).data)

    @extend_schema(responses=CommitIdOutputSerializer, **WRITE_DOC)
    def delete(self, request, catalog, ref, database, table):
        commit = table_services.table_drop(target=write_target(request, catalog, ref), database=database, name=table)
        return Response(CommitIdOutputSerializer(commit).data)


class ColumnListApi(APIView):
    class InputSerializer(ColumnSerializer, WriteInputSerializer):
        pass

    @extend_schema(request=InputSerializer, responses={201: TableOutputSerializer}, **WRITE_DOC)
    def post(self, request, catalog, ref, database, table):
        spec = dict(validated(self.InputSerializer, request.data))
        spec.pop("message", None)
        version = table_services.column_add(
            target=write_target(request, catalog, ref), database=database, table=table, spec=spec
        )
        return created(version, TableOutputSerializer)


class ColumnDetailApi(APIView):
    class UpdateInputSerializer(WriteInputSerializer):
        name = serializers.CharField(max_length=63, required=False)
        type = serializers.CharField(max_length=40, required=False)
        nullable = serializers.BooleanField(required=False)
        default = serializers.JSONField(required=False, allow_null=True)

    @extend_schema(request=UpdateInputSerializer, responses=TableOutputSerializer, **WRITE_DOC)
    def patch(self, request, catalog, ref, database, table, column):
        changes = dict(validated(self.UpdateInputSerializer, request.data))
        changes.pop("message", None)
        version = table_services.column_update(
            target=write_target(request, catalog, ref), database=database, table=table, column=column, changes=changes
        )
        return Response(TableOutputSerializer(version).data)

    @extend_schema(responses=TableOutputSerializer, **WRITE_DOC)
    def delete(self, request, catalog, ref, database, table, column):
        version = table_services.column_drop(
            target=write_target(request, catalog, ref), database=database, table=table, column=column
        )
        return Response(TableOutputSerializer(version).data)


# --- views, shares and roles (branch-scoped, never merged) ----------------------------------------------


class BranchObjectOutputSerializer(VersionOutputSerializer):
    kind = serializers.CharField()
    state = serializers.JSONField()


class BranchObjectInputSerializer(WriteInputSerializer):
    name = serializers.CharField(max_length=63)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class ViewInputSerializer(BranchObjectInputSerializer):
    sql = serializers.CharField(max_length=100_000, help_text="The view's SELECT, stored as text")


class BranchObjectListApi(PagedApi):
    """Views (in a database), shares and roles. `kind` is set per route."""

    kind = VIEW
    input_serializer = BranchObjectInputSerializer

    def _parent(self, chain, database):
        return _database(chain, database).object_id if database else None

    @extend_schema(parameters=[AT_PARAMETER], responses=BranchObjectOutputSerializer(many=True))
    def get(self, request, catalog, ref, database=None):
        chain = read_chain(request, catalog, ref)
        versions = objects_at(chain, kind=self.kind, parent_id=self._parent(chain, database))
        return paginated(request, self, versions, BranchObjectOutputSerializer)

    @extend_schema(request=BranchObjectInputSerializer, responses={201: BranchObjectOutputSerializer}, **WRITE_DOC)
    def post(self, request, catalog, ref, database=None):
        data = dict(validated(self.input_serializer, request.data))
        data.pop("message", None)
        name = data.pop("name")
        version = branch_object_create(
            target=write_target(request, catalog, ref), kind=self.kind, name=name, state=data, database=database
        )
        return created(version, BranchObjectOutputSerializer)


class BranchObjectDetailApi(APIView):
    kind = VIEW

    @extend_schema(parameters=[AT_PARAMETER], responses=BranchObjectOutputSerializer)
    def get(self, request, catalog, ref, name, database=None):
        chain = read_chain(request, catalog, ref)
        parent = _database(chain, database).object_id if database else None
        return Response(
            BranchObjectOutputSerializer(object_get(chain, kind=self.kind, name=name, parent_id=parent)).data
        )

    @extend_schema(responses=CommitIdOutputSerializer, **WRITE_DOC)
    def delete(self, request, catalog, ref, name, database=None):
        target = write_target(request, catalog, ref)
        commit = branch_object_drop(target=target, kind=self.kind, name=name, database=database)
        return Response(CommitIdOutputSerializer(commit).data)
