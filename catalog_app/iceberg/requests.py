"""The Iceberg REST request bodies LakeUI takes, parsed once at the edge (catalog_app/apis/iceberg.py) from the
REST catalog spec's schemas (`CreateNamespaceRequest`, `CreateTableRequest`, `CommitTableRequest`,
`CommitTransactionRequest`, `RegisterTableRequest`, `RenameTableRequest`, `TableRequirement`, `TableUpdate`).

Every shape the spec does not allow is a 400 `BadRequestException` naming the field, before anything is read or
written: a string where an object goes, a float or a boolean where an integer goes (types are strict, nothing is
coerced), a list holding what is not an object. Fields the spec adds later are let through (as the spec allows);
an update whose `action` LakeUI does not know keeps its shape for the commit to answer 406.

Schemas are held to the rules an engine must keep for the table to stay loadable (Iceberg's own checks on reading
metadata): field ids unique, names strings, every identifier field a field of the schema, required, and of a
primitive type other than float and double. Ids are never renumbered silently: a duplicate is refused.
"""

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    model_validator,
)

from lakeui.errors import ApplicationError

MAX_URI = 4096  # a file location a client names
NOT_IDENTIFIER_TYPES = ("float", "double")
MODEL_NAME = re.compile(r" or (an )?instance of \w+")  # pydantic's words for a model: not the client's concern
M = TypeVar("M", bound=BaseModel)
MESSAGE_FIELD = "Invalid request body: {field}: {problem}."


class Spec(BaseModel):
    """A schema object of the REST spec: its named fields typed strictly, other fields kept (the spec adds some)."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


def _path(value: str, what: str) -> str:
    """A file location as a client names it: the file itself is resolved and checked before it is opened
    (catalog_app/engine/iceberg_incoming.py, `file_checked`); here only what no path may be."""
    if "\x00" in value:
        raise ValueError(f"{what} holds a NUL character")
    if len(value) > MAX_URI:
        raise ValueError(f"{what} is longer than {MAX_URI} characters")
    return value


class SchemaField(Spec):
    id: StrictInt
    name: StrictStr
    type: StrictStr | dict[str, Any]
    required: StrictBool
    doc: StrictStr | None = None


class Schema(Spec):
    type: Literal["struct"] = "struct"
    schema_id: StrictInt | None = Field(None, alias="schema-id")
    identifier_field_ids: list[StrictInt] | None = Field(None, alias="identifier-field-ids")
    fields: list[SchemaField]

    @model_validator(mode="after")
    def rules(self) -> "Schema":
        """Iceberg's rules for a schema a table can be loaded with."""
        seen: set[int] = set()
        for field in self.fields:
            if field.id in seen:
                raise ValueError(f"field id {field.id} is given twice (ids are never renumbered)")
            seen.add(field.id)
        by_id = {f.id: f for f in self.fields}
        for field_id in self.identifier_field_ids or []:
            field = by_id.get(field_id)
            if field is None:
                raise ValueError(f"identifier field id {field_id} names no field of the schema")
            if not field.required:
                raise ValueError(f"identifier field {field.name!r} must be required (not nullable)")
            if not isinstance(field.type, str) or field.type in NOT_IDENTIFIER_TYPES:
                kind = field.type if isinstance(field.type, str) else "nested"
                raise ValueError(f"identifier field {field.name!r} is of type {kind}, which no identifier field may be")
        return self


class PartitionField(Spec):
    field_id: StrictInt | None = Field(None, alias="field-id")
    source_id: StrictInt = Field(alias="source-id")
    name: StrictStr
    transform: StrictStr


class PartitionSpec(Spec):
    spec_id: StrictInt | None = Field(None, alias="spec-id")
    fields: list[PartitionField]


class SortOrder(Spec):
    order_id: StrictInt = Field(alias="order-id")
    fields: list[dict[str, Any]]


Properties = dict[StrictStr, StrictStr]


class CreateNamespaceRequest(Spec):
    namespace: list[StrictStr]
    properties: Properties | None = None


class CreateTableRequest(Spec):
    name: StrictStr
    location: StrictStr | None = None
    schema_: Schema = Field(alias="schema")
    partition_spec: PartitionSpec | None = Field(None, alias="partition-spec")
    write_order: SortOrder | None = Field(None, alias="write-order")
    stage_create: StrictBool | None = Field(None, alias="stage-create")
    properties: Properties | None = None


class QueryEventsRequest(Spec):
    """The events endpoint's body (apache/iceberg#12584); filters LakeUI does not serve are kept and ignored."""

    continuation_token: StrictStr | None = Field(None, alias="continuation-token", max_length=32)
    page_size: StrictInt | None = Field(None, alias="page-size", ge=1, le=1000)
    after_timestamp_ms: StrictInt | None = Field(None, alias="after-timestamp-ms", ge=0)
    operation_types: list[StrictStr] | None = Field(None, alias="operation-types", max_length=64)


class RegisterTableRequest(Spec):
    name: StrictStr
    metadata_location: StrictStr = Field(alias="metadata-location")
    overwrite: StrictBool | None = None

    @model_validator(mode="after")
    def location(self) -> "RegisterTableRequest":
        _path(self.metadata_location, "metadata-location")
        return self


class TableIdentifier(Spec):
    namespace: list[StrictStr]
    name: StrictStr


class RenameTableRequest(Spec):
    source: TableIdentifier
    destination: TableIdentifier


# --- requirements ------------------------------------------------------------------------------------------


class AssertCreate(Spec):
    type: Literal["assert-create"]


class AssertTableUuid(Spec):
    type: Literal["assert-table-uuid"]
    uuid: StrictStr


class AssertRefSnapshotId(Spec):
    type: Literal["assert-ref-snapshot-id"]
    ref: StrictStr
    snapshot_id: StrictInt | None = Field(None, alias="snapshot-id")  # null (or left out): the ref does not exist


class AssertLastAssignedFieldId(Spec):
    type: Literal["assert-last-assigned-field-id"]
    last_assigned_field_id: StrictInt = Field(alias="last-assigned-field-id")


class AssertCurrentSchemaId(Spec):
    type: Literal["assert-current-schema-id"]
    current_schema_id: StrictInt = Field(alias="current-schema-id")


class AssertLastAssignedPartitionId(Spec):
    type: Literal["assert-last-assigned-partition-id"]
    last_assigned_partition_id: StrictInt = Field(alias="last-assigned-partition-id")


class AssertDefaultSpecId(Spec):
    type: Literal["assert-default-spec-id"]
    default_spec_id: StrictInt = Field(alias="default-spec-id")


class AssertDefaultSortOrderId(Spec):
    type: Literal["assert-default-sort-order-id"]
    default_sort_order_id: StrictInt = Field(alias="default-sort-order-id")


Requirement = Annotated[
    AssertCreate
    | AssertTableUuid
    | AssertRefSnapshotId
    | AssertLastAssignedFieldId
    | AssertCurrentSchemaId
    | AssertLastAssignedPartitionId
    | AssertDefaultSpecId
    | AssertDefaultSortOrderId,
    Field(discriminator="type"),
]


# --- updates -----------------------------------------------------------------------------------------------


class AssignUuid(Spec):
    action: Literal["assign-uuid"]
    uuid: StrictStr


class UpgradeFormatVersion(Spec):
    action: Literal["upgrade-format-version"]
    format_version: StrictInt = Field(alias="format-version")


class AddSchema(Spec):
    action: Literal["add-schema"]
    schema_: Schema = Field(alias="schema")
    last_column_id: StrictInt | None = Field(None, alias="last-column-id")


class SetCurrentSchema(Spec):
    action: Literal["set-current-schema"]
    schema_id: StrictInt = Field(alias="schema-id")


class AddSpec(Spec):
    action: Literal["add-spec"]
    spec: PartitionSpec


class SetDefaultSpec(Spec):
    action: Literal["set-default-spec"]
    spec_id: StrictInt = Field(alias="spec-id")


class AddSortOrder(Spec):
    action: Literal["add-sort-order"]
    sort_order: SortOrder = Field(alias="sort-order")


class SetDefaultSortOrder(Spec):
    action: Literal["set-default-sort-order"]
    sort_order_id: StrictInt = Field(alias="sort-order-id")


class Snapshot(Spec):
    snapshot_id: StrictInt = Field(alias="snapshot-id")
    parent_snapshot_id: StrictInt | None = Field(None, alias="parent-snapshot-id")
    sequence_number: StrictInt | None = Field(None, alias="sequence-number")
    timestamp_ms: StrictInt = Field(alias="timestamp-ms")
    manifest_list: StrictStr = Field(alias="manifest-list")
    summary: dict[StrictStr, Any]
    schema_id: StrictInt | None = Field(None, alias="schema-id")

    @model_validator(mode="after")
    def location(self) -> "Snapshot":
        _path(self.manifest_list, "manifest-list")
        return self


class AddSnapshot(Spec):
    action: Literal["add-snapshot"]
    snapshot: Snapshot


class SetSnapshotRef(Spec):
    action: Literal["set-snapshot-ref"]
    ref_name: StrictStr = Field(alias="ref-name")
    type: Literal["branch", "tag"] = "branch"
    snapshot_id: StrictInt = Field(alias="snapshot-id")
    max_ref_age_ms: StrictInt | None = Field(None, alias="max-ref-age-ms")
    max_snapshot_age_ms: StrictInt | None = Field(None, alias="max-snapshot-age-ms")
    min_snapshots_to_keep: StrictInt | None = Field(None, alias="min-snapshots-to-keep")


class SetLocation(Spec):
    action: Literal["set-location"]
    location: StrictStr


class SetProperties(Spec):
    action: Literal["set-properties"]
    updates: Properties


class RemoveProperties(Spec):
    action: Literal["remove-properties"]
    removals: list[StrictStr]


class SetStatistics(Spec):
    action: Literal["set-statistics"]
    statistics: dict[StrictStr, Any]


class RemoveStatistics(Spec):
    action: Literal["remove-statistics"]
    snapshot_id: StrictInt = Field(alias="snapshot-id")


class SetPartitionStatistics(Spec):
    action: Literal["set-partition-statistics"]
    partition_statistics: dict[StrictStr, Any] = Field(alias="partition-statistics")


class RemovePartitionStatistics(Spec):
    action: Literal["remove-partition-statistics"]
    snapshot_id: StrictInt = Field(alias="snapshot-id")


class RemovePartitionSpecs(Spec):
    action: Literal["remove-partition-specs"]
    spec_ids: list[StrictInt] = Field(alias="spec-ids")


class OtherUpdate(Spec):
    """An update LakeUI does not take (the commit answers 406 naming it): only its action is checked here."""

    action: StrictStr


UPDATES: dict[str, type[Spec]] = {
    model.model_fields["action"].annotation.__args__[0]: model  # type: ignore[union-attr]
    for model in (
        AssignUuid, UpgradeFormatVersion, AddSchema, SetCurrentSchema, AddSpec, SetDefaultSpec, AddSortOrder,
        SetDefaultSortOrder, AddSnapshot, SetSnapshotRef, SetLocation, SetProperties, RemoveProperties,
        SetStatistics, RemoveStatistics, SetPartitionStatistics, RemovePartitionStatistics, RemovePartitionSpecs,
    )
}  # fmt: skip


def _action(value: Any) -> str:
    action = value.get("action") if isinstance(value, dict) else getattr(value, "action", None)
    return action if isinstance(action, str) and action in UPDATES else "other"


Update = Annotated[
    Annotated[AssignUuid, Tag("assign-uuid")]
    | Annotated[UpgradeFormatVersion, Tag("upgrade-format-version")]
    | Annotated[AddSchema, Tag("add-schema")]
    | Annotated[SetCurrentSchema, Tag("set-current-schema")]
    | Annotated[AddSpec, Tag("add-spec")]
    | Annotated[SetDefaultSpec, Tag("set-default-spec")]
    | Annotated[AddSortOrder, Tag("add-sort-order")]
    | Annotated[SetDefaultSortOrder, Tag("set-default-sort-order")]
    | Annotated[AddSnapshot, Tag("add-snapshot")]
    | Annotated[SetSnapshotRef, Tag("set-snapshot-ref")]
    | Annotated[SetLocation, Tag("set-location")]
    | Annotated[SetProperties, Tag("set-properties")]
    | Annotated[RemoveProperties, Tag("remove-properties")]
    | Annotated[SetStatistics, Tag("set-statistics")]
    | Annotated[RemoveStatistics, Tag("remove-statistics")]
    | Annotated[SetPartitionStatistics, Tag("set-partition-statistics")]
    | Annotated[RemovePartitionStatistics, Tag("remove-partition-statistics")]
    | Annotated[RemovePartitionSpecs, Tag("remove-partition-specs")]
    | Annotated[OtherUpdate, Tag("other")],
    Discriminator(_action),
]


class CommitTableRequest(Spec):
    identifier: TableIdentifier | None = None
    requirements: list[Requirement]
    updates: list[Update]


class TableChange(CommitTableRequest):
    identifier: TableIdentifier


class CommitTransactionRequest(Spec):
    table_changes: list[TableChange] = Field(alias="table-changes")

    @model_validator(mode="after")
    def once_each(self) -> "CommitTransactionRequest":
        """A table named twice would be committed from one base twice: refused before anything is read."""
        seen = set()
        for change in self.table_changes:
            key = (tuple(change.identifier.namespace), change.identifier.name)
            if key in seen:
                raise ValueError(f"table {'.'.join(key[0])}.{key[1]} is named twice; commit each table once")
            seen.add(key)
        return self


def _where(loc: tuple) -> str:
    """pydantic's location of an error as the body names it: `updates[0].snapshot.manifest-list`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in UPDATES or part == "other" or str(part).startswith(("assert-", "function-")):
            continue  # the union member pydantic tried, not a field of the body
        else:
            text += f".{part}" if text else str(part)
    return text or "body"


def parsed(model: type[M], body: Any) -> M:
    """`body` as `model`, or a 400 naming the first field that does not fit."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        problem = MODEL_NAME.sub("", error["msg"].removeprefix("Value error, "))
        raise ApplicationError(
            "invalid_input", MESSAGE_FIELD.format(field=_where(error["loc"]), problem=problem)
        ) from None
