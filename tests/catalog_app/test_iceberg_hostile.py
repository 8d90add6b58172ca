"""Hostile input to the Iceberg REST write surface against a live server: every body shape the REST spec does not
allow, forged files, links to another catalog's files and racing writers. Each refusal is a 4xx in the protocol's
error shape, and nothing changes: branch heads, the catalog tables' row counts and the files under the warehouse
are the same after it as before."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import copy
import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from django.apps import apps
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pyiceberg.exceptions import BadRequestError
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from catalog_app.models import Branch
from catalog_app.models import DataFile as LakeFile
from tests.catalog_app.test_iceberg_rest import api_rows, client, iceberg, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import KEYLESS, SCHEMA, external_catalog, rows

ERROR_TYPES = {400: "BadRequestException", 403: "ForbiddenException", 404: "NoSuchTableException",
               409: "CommitFailedException"}  # fmt: skip
ROUNDS = 20


def warehouse() -> Path:
    return Path(os.path.abspath(settings.LAKEUI_WAREHOUSE))


def state() -> dict:
    """What a refused request must leave as it was: every branch head, the row count of every catalog table, and
    every file under the warehouse (with its size)."""
    root = warehouse()
    return {
        "heads": dict(Branch.objects.values_list("id", "head_id")),
        "rows": {m._meta.label: m.objects.count() for m in apps.get_app_config("catalog_app").get_models()},
        "files": {str(p.relative_to(root)): p.lstat().st_size for p in root.rglob("*") if not p.is_dir()},
    }


@pytest.fixture
def lake(live_server, client, token):
    """Catalog `lake`, its main branch through pyiceberg, shop.orders (keyed by id) holding ids 0-4, loaded once
    (its served metadata written) so that a refused request has nothing left to write."""
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    orders = main.create_table("shop.orders", SCHEMA)
    orders.append(rows(range(5)))
    base = f"{live_server.url}/iceberg/lake/main/v1"
    headers = {"Authorization": f"Bearer {token}"}
    loaded = requests.get(f"{base}/namespaces/shop/tables/orders", headers=headers).json()
    return SimpleNamespace(
        base=base, headers=headers, main=main, client=client, loaded=loaded,
        data=Path(loaded["metadata"]["properties"]["write.data.path"]),
        metadata=Path(loaded["metadata"]["properties"]["write.metadata.path"]),
        snapshot=loaded["metadata"]["current-snapshot-id"],
    )  # fmt: skip


def refused(lake, path: str, body, *, status: int = 400, says: str | None = None, raw: bytes | None = None) -> dict:
    """POST `body` to `path`: a 4xx (`status`) in Iceberg's error shape, nothing changed. The error is returned."""
    before = state()
    data = raw if raw is not None else json.dumps(body)
    answer = requests.post(
        f"{lake.base}{path}", data=data, headers={**lake.headers, "Content-Type": "application/json"}
    )
    assert answer.status_code == status, (path, body, answer.status_code, answer.text[:500])
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == status, error
    assert error["type"] == ERROR_TYPES[status] or status == 404, error
    if says is not None:
        assert says in error["message"], (says, error["message"])
    assert state() == before, (path, body)
    return error


TABLE = "/namespaces/shop/tables"
ORDERS = "/namespaces/shop/tables/orders"
REGISTER = "/namespaces/shop/register"
FIELDS = [{"id": 1, "name": "id", "type": "long", "required": True},
          {"id": 2, "name": "v", "type": "string", "required": False}]  # fmt: skip


def create(**changes) -> dict:
    body = {"name": "t1", "schema": {"type": "struct", "schema-id": 0, "identifier-field-ids": [1],
                                     "fields": copy.deepcopy(FIELDS)}}  # fmt: skip
    body.update(changes)
    return body


def schema(fields=None, ids=(1,)) -> dict:
    return {"type": "struct", "schema-id": 1, "identifier-field-ids": list(ids), "fields": fields or FIELDS}


def commit(*updates, requirements=()) -> dict:
    return {"requirements": list(requirements), "updates": list(updates)}


def snapshot(**changes) -> dict:
    body = {"snapshot-id": 7, "timestamp-ms": 1, "manifest-list": "/x/snap.avro", "summary": {"operation": "append"}}
    return {"action": "add-snapshot", "snapshot": {**body, **changes}}


# Every body the issue found answered 500, and every shape it found taken that must not be: (path, body, says).
SHAPES = [
    ("/namespaces", {"namespace": ["ns"], "properties": 5}, "properties"),
    ("/namespaces", {"namespace": ["ns"], "properties": ["a"]}, "properties"),
    ("/namespaces", {"namespace": ["ns"], "properties": {"a": 1}}, "properties.a"),
    ("/namespaces", {"namespace": "ns"}, "namespace"),
    ("/namespaces", [1], "JSON object"),
    *[(TABLE, create(schema=bad), "schema") for bad in ("x", 5, [1], None)],
    *[(TABLE, create(schema={"type": "struct", "fields": bad}), "schema.fields") for bad in ([1], ["x"], [None], 5)],
    *[
        (TABLE, create(schema={"type": "struct", "fields": [{**FIELDS[0], "id": bad}]}), "schema.fields[0].id")
        for bad in ({}, [1], "1", 1.0, True)
    ],
    *[
        (TABLE, create(schema={**schema(), "identifier-field-ids": bad}), "identifier-field-ids")
        for bad in ("x", [1.5], ["1"], 1)
    ],
    *[
        (TABLE, create(**{"partition-spec": bad}), "partition-spec")
        for bad in ("x", {"fields": 5}, {"fields": [1]}, {"fields": [{"source-id": "2"}]})
    ],
    (TABLE, create(properties=5), "properties"),
    (TABLE, create(properties={"a": None}), "properties.a"),
    (TABLE, create(name=None), "name"),
    (TABLE, create(**{"stage-create": True, "schema": {"type": "struct", "fields": [1]}}), "schema.fields[0]"),
    (TABLE, create(**{"stage-create": "yes"}), "stage-create"),
    # Iceberg's schema rules: ids unique, identifier fields present, required, not float/double
    (TABLE, create(schema=schema([FIELDS[0], {**FIELDS[1], "id": 1}])), "given twice"),
    (TABLE, create(schema=schema(ids=(9,))), "names no field"),
    (TABLE, create(schema=schema([{**FIELDS[0], "required": False}, FIELDS[1]])), "must be required"),
    (TABLE, create(schema=schema([{**FIELDS[0], "type": "double"}, FIELDS[1]])), "type double"),
    (TABLE, create(schema=schema([{**FIELDS[0], "type": {"type": "list"}}, FIELDS[1]])), "nested"),
    (TABLE, create(schema=schema([{**FIELDS[0], "name": None}, FIELDS[1]])), "name"),
    *[(ORDERS, {"requirements": bad, "updates": []}, "requirements") for bad in ("x", {}, ["x"], [None], [[1]], 5, 7)],
    *[(ORDERS, {"requirements": [], "updates": bad}, "updates") for bad in ("x", {}, ["x"], [None], [[1]], 5, 7)],
    (ORDERS, {"requirements": [{"type": "assert-bogus"}], "updates": []}, "requirements[0]"),
    (
        ORDERS,
        {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": "1"}], "updates": []},
        "snapshot-id",
    ),
    (ORDERS, commit({"action": "set-properties", "updates": 5}), "updates[0].updates"),
    (ORDERS, commit({"action": "remove-properties", "removals": 5}), "updates[0].removals"),
    *[
        (ORDERS, commit({"action": "upgrade-format-version", "format-version": bad}), "format-version")
        for bad in ("abc", [2], 2.0)
    ],
    *[(ORDERS, commit({"action": "add-schema", "schema": bad}), "updates[0].schema") for bad in ("x", {"fields": [1]})],
    (ORDERS, commit({"action": "add-snapshot", "snapshot": "x"}), "updates[0].snapshot"),
    (ORDERS, commit(snapshot(**{"snapshot-id": [1]})), "snapshot-id"),
    (ORDERS, commit(snapshot(**{"manifest-list": 5})), "manifest-list"),
    (ORDERS, commit(snapshot(**{"manifest-list": "/x/a\x00b.avro"})), "NUL"),
    (
        ORDERS,
        commit({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": "7"}),
        "snapshot-id",
    ),
    # add-schema making the key column nullable, or giving the key a double: the table would be unloadable
    (ORDERS, commit({"action": "add-schema", "schema": schema([{**FIELDS[0], "required": False}])}), "required"),
    (ORDERS, commit({"action": "add-schema", "schema": schema([{**FIELDS[0], "type": "double"}])}), "type double"),
    ("/transactions/commit", {"table-changes": 5}, "table-changes"),
    ("/transactions/commit", {"table-changes": [5]}, "table-changes[0]"),
    ("/transactions/commit", {"table-changes": [{"requirements": [], "updates": []}]}, "identifier"),
    (REGISTER, {"name": "r", "metadata-location": 5}, "metadata-location"),
    (REGISTER, {"name": None, "metadata-location": "/x.json"}, "name"),
    (REGISTER, {"name": "r", "metadata-location": "/x\x00.json"}, "NUL"),
    ("/tables/rename", {"source": "x", "destination": {"namespace": ["shop"], "name": "o"}}, "source"),
    (
        "/tables/rename",
        {"source": {"namespace": ["shop"], "name": "orders"}, "destination": {"namespace": "shop", "name": 1}},
        "destination.namespace",
    ),
]


def test_every_shape_the_spec_does_not_allow_is_a_400_naming_the_field(lake):
    for path, body, says in SHAPES:
        refused(lake, path, body, says=says)
    refused(lake, "/namespaces", None, raw=b'{"namespace": ', says="JSON")


def test_a_schema_that_would_leave_the_table_unloadable_is_refused(lake):
    # add-schema making the key column nullable while naming no identifier field: the table's key stays its key
    nullable = schema([{**FIELDS[0], "required": False}, {"id": 2, "name": "amount", "type": "int", "required": False},
                       {"id": 3, "name": "region", "type": "string", "required": False}], ids=())  # fmt: skip
    body = commit({"action": "add-schema", "schema": nullable}, {"action": "set-current-schema", "schema-id": -1})
    refused(lake, ORDERS, body, says="the table's key")
    assert lake.main.load_table("shop.orders").schema().identifier_field_ids == [1]  # still loadable, still keyed


def test_a_table_named_twice_in_one_transaction_is_refused_before_anything_is_written(lake):
    orders = lake.main.load_table("shop.orders")
    first, second = orders.transaction(), orders.transaction()
    first.append(rows([10]))
    second.append(rows([11]))
    from tests.catalog_app.test_iceberg_writes import table_change

    changes = [table_change(orders, first), table_change(orders, second)]
    refused(lake, "/transactions/commit", {"table-changes": changes}, says="named twice")
    # the same change twice (one file named twice) too
    refused(lake, "/transactions/commit", {"table-changes": [changes[0], changes[0]]}, says="named twice")
    assert [r[0] for r in api_rows(lake.client, "main", "shop.orders")[1]] == [0, 1, 2, 3, 4]


def test_files_that_cannot_be_read_are_a_400_naming_them(lake):
    lake.metadata.mkdir(parents=True, exist_ok=True)
    junk = lake.metadata / "junk.avro"
    junk.write_bytes(b"Obj\x01" + os.urandom(64))  # an Avro header, then noise: pyiceberg's decoder fails oddly
    long = f"{lake.metadata}/{'a' * 1100}.avro"
    requirement = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": lake.snapshot}
    for manifest_list, says in ((f"file://{junk}", "junk.avro"), (long, "1024"), (str(lake.data / "none.avro"),
                                                                                   "does not exist")):  # fmt: skip
        body = commit(snapshot(**{"manifest-list": manifest_list, "parent-snapshot-id": lake.snapshot}),
                      {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
                      requirements=[requirement])  # fmt: skip
        refused(lake, ORDERS, body, says=says)


def engine_append(table, location: str, size: int = 1, record_count: int = 1) -> None:
    """An append naming `location` as a data file, unread (pyiceberg writes its manifests, LakeUI checks the rest)."""
    data_file = DataFile.from_args(
        _table_format_version=2, content=DataFileContent.DATA, file_path=location, file_format=FileFormat.PARQUET,
        partition=Record(), record_count=record_count, file_size_in_bytes=size,
    )  # fmt: skip
    data_file.spec_id = 0
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)


def unchanged_but_the_engines_metadata(before: dict, lake) -> None:
    """State after a refused pyiceberg commit: the engine wrote its manifests into the write location; nothing else
    changed."""
    after = state()
    assert (after["heads"], after["rows"]) == (before["heads"], before["rows"])
    folder = str(lake.metadata.relative_to(warehouse()))
    new = {p for p in after["files"].keys() - before["files"].keys() if not p.startswith(f"{folder}/")}
    assert not new and all(after["files"][p] == size for p, size in before["files"].items())


def test_data_file_paths_with_nul_or_longer_than_the_catalog_keeps_are_a_400(lake):
    orders = lake.main.load_table("shop.orders")
    before = state()
    for location, says in ((f"{lake.data}/x\x00y.parquet", "NUL"), (f"{lake.data}/{'b' * 1100}.parquet", "1024")):
        with pytest.raises(BadRequestError, match=says):
            engine_append(lake.main.load_table("shop.orders"), location)
    unchanged_but_the_engines_metadata(before, lake)
    assert orders.metadata.current_snapshot_id == lake.main.load_table("shop.orders").metadata.current_snapshot_id


def forged_table(name: str):
    """A table of pyiceberg's SqlCatalog under `external/` (where tables are registered from): its folder and its
    metadata file."""
    local, folder = external_catalog(name)
    local.create_namespace("shop")
    table = local.create_table("shop.t", KEYLESS)
    table.append(rows([1, 2]).cast(KEYLESS.as_arrow()))
    table = local.load_table("shop.t")
    return local, folder, table


def test_forged_metadata_is_refused_by_register(lake):
    _, folder, table = forged_table("forged")
    metadata = json.loads(Path(table.metadata_location.removeprefix("file://")).read_text())
    junk = folder / "junk.avro"
    junk.write_bytes(b"Obj\x01" + os.urandom(64))
    forged = {
        "not-json.metadata.json": (b"{not json", "cannot be read"),
        "list.metadata.json": (b"[1, 2]", "a JSON list"),
        "v1.metadata.json": (json.dumps({**metadata, "format-version": 1}).encode(), "format version 2"),
        "junk-list.metadata.json": (json.dumps({**metadata, "snapshots": [
            {**s, "manifest-list": f"file://{junk}"} for s in metadata["snapshots"]]}).encode(), "junk.avro"),
        "bad-schema.metadata.json": (json.dumps({**metadata, "schemas": "x"}).encode(), "no valid Iceberg"),
    }  # fmt: skip
    for name, (content, _) in forged.items():
        (folder / name).write_bytes(content)
    for name, (_, says) in forged.items():
        refused(lake, REGISTER, {"name": "r", "metadata-location": f"file://{folder / name}"}, says=says)


def test_links_to_another_catalogs_files_are_refused_by_commit_and_register(live_server, lake, token):
    # catalog `other` holds a secret table of the same schema: its Parquet file would pass every other check
    lake.client.catalog_create("other")
    other = iceberg(live_server, token, "main", catalog="other")
    other.create_namespace("shop")
    secret = other.create_table("shop.secret", SCHEMA)
    secret.append(rows([900, 901], region="secret"))
    [secret_file] = [warehouse() / f.path for f in LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT,
                                                                           path__contains="/writes/")
                     if str(f.catalog_id) == lake.client.catalog("other")["id"]]  # fmt: skip

    # planted in this table's write folder: a symlink, a hard link, a symlinked folder
    lake.data.mkdir(parents=True, exist_ok=True)
    (lake.data / "symlink.parquet").symlink_to(secret_file)
    os.link(secret_file, lake.data / "hardlink.parquet")
    (lake.data / "folder").symlink_to(secret_file.parent, target_is_directory=True)
    planted = {"symlink.parquet": "symbolic link", "hardlink.parquet": "hard links",
               f"folder/{secret_file.name}": "symbolic link"}  # fmt: skip
    before = state()
    for name, says in planted.items():
        with pytest.raises(BadRequestError, match=says):
            # the file's true row count and size: only how it is reached is wrong
            engine_append(lake.main.load_table("shop.orders"), str(lake.data / name), secret_file.stat().st_size, 2)
    unchanged_but_the_engines_metadata(before, lake)

    # planted under external/: a registered table's data file replaced by a symlink, then by a hard link, and its
    # metadata file itself a symlink
    _local, folder, table = forged_table("stolen")
    [data_file] = [Path(t.file.file_path.removeprefix("file://")) for t in table.scan().plan_files()]
    data_file.unlink()
    data_file.symlink_to(secret_file)
    refused(lake, REGISTER, {"name": "stolen", "metadata-location": table.metadata_location}, says="symbolic link")
    data_file.unlink()
    os.link(secret_file, data_file)
    refused(lake, REGISTER, {"name": "stolen", "metadata-location": table.metadata_location}, says="hard links")
    pointer = folder / "pointer.metadata.json"
    pointer.symlink_to(Path(table.metadata_location.removeprefix("file://")))
    refused(lake, REGISTER, {"name": "stolen", "metadata-location": f"file://{pointer}"}, says="symbolic link")

    # no row of the other catalog is readable through this one
    assert [r[0] for r in api_rows(lake.client, "main", "shop.orders")[1]] == [0, 1, 2, 3, 4]
    assert lake.main.list_tables("shop") == [("shop", "orders")]
    lake_id = lake.client.catalog("lake")["id"]
    assert not any(str(secret_file.name) in f.path for f in LakeFile.objects.filter(catalog_id=lake_id))
    scanned = lake.main.load_table("shop.orders").scan().to_arrow()
    assert sorted(scanned["id"].to_pylist()) == [0, 1, 2, 3, 4] and "secret" not in scanned["region"].to_pylist()


# --- property-based: JSON shapes drawn for every request body ------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
KINDS = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}
OF_KIND = {
    "bool": st.booleans(), "int": st.integers(), "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.text(max_size=8), "list": st.lists(JSON, max_size=3),
    "dict": st.dictionaries(st.text(max_size=6), JSON, max_size=3),
}  # fmt: skip
REF = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}
UPDATES = [
    {"action": "set-properties", "updates": {"k": "v"}},
    {"action": "remove-properties", "removals": ["k"]},
    {"action": "upgrade-format-version", "format-version": 2},
    {"action": "add-schema", "schema": schema()},
    {"action": "set-current-schema", "schema-id": 1},
    snapshot(**{"parent-snapshot-id": 1, "summary": {}}),  # a summary's values are the engine's to choose
    {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
]
IDENTIFIER = {"namespace": ["shop"], "name": "orders"}
# A valid body of each request (refused or not for other reasons): a drawn mutation makes one of its values of a
# type the spec does not allow there.
TEMPLATES = {
    "/namespaces": {"namespace": ["ns"], "properties": {"owner": "data"}},
    TABLE: create(
        **{
            "partition-spec": {
                "spec-id": 0,
                "fields": [{"source-id": 2, "field-id": 1000, "name": "v", "transform": "identity"}],
            },
            "properties": {"a": "b"},
            "stage-create": False,
        }
    ),
    ORDERS: {"requirements": [REF, {"type": "assert-current-schema-id", "current-schema-id": 0}], "updates": UPDATES},
    "/transactions/commit": {"table-changes": [{"identifier": IDENTIFIER, "requirements": [REF], "updates": UPDATES}]},
    REGISTER: {"name": "r", "metadata-location": "/nowhere.metadata.json", "overwrite": False},
    "/tables/rename": {"source": IDENTIFIER, "destination": {"namespace": ["shop"], "name": "renamed"}},
}
# Values whose type the spec leaves open: a schema field's type is a type's name or a nested type's object.
OPEN = {"long", "string"}


def places(value, path=()):
    """Every place of a JSON value (the path to it), the value itself included."""
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from places(inner, (*path, index))


def at(value, path):
    for part in path:
        value = value[part]
    return value


def named(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "body"


@st.composite
def mutated(draw, template):
    """The template with the value at one drawn place replaced by a value of another JSON type (never null, which
    some fields allow): what the spec does not allow there."""
    choices = [p for p in places(template) if not (p and p[-1] == "type" and at(template, p) in OPEN)]
    path = draw(st.sampled_from(choices))
    kind = KINDS[type(at(template, path))]
    value = draw(st.one_of(*(s for k, s in OF_KIND.items() if k != kind)))
    body = copy.deepcopy(template)
    if not path:
        return path, value
    at(body, path[:-1])[path[-1]] = value
    return path, body


def drawn_bodies_refused(lake, endpoint: str, template: dict) -> None:
    """Drawn mutations of the endpoint's template, and drawn JSON of any shape, each refused with nothing changed."""

    @hypothesis_settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(drawn=mutated(template))
    def a_wrong_type_is_a_400_naming_it(drawn):
        path, body = drawn
        error = refused(lake, endpoint, body)
        field = error["message"].removeprefix("Invalid request body: ").split(":")[0]
        nul = "NUL character" in error["message"]  # refused as text before the body is parsed, anywhere in it
        assert not path or nul or field == "body" or named(path).startswith(field), (path, error)

    @hypothesis_settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body=JSON)
    def any_json_is_refused(body):
        refused(lake, endpoint, body)

    a_wrong_type_is_a_400_naming_it()
    any_json_is_refused()


def test_drawn_shapes_of_every_request_body_are_refused(lake):
    for endpoint, template in TEMPLATES.items():
        drawn_bodies_refused(lake, endpoint, template)


# --- concurrency: one success and one 409, never a 500 --------------------------------------------------------


def racing(*calls) -> list[requests.Response]:
    """Start the calls together, each in a thread of its own; their answers."""
    barrier = threading.Barrier(len(calls))
    answers: list = [None] * len(calls)

    def run(index, call):
        barrier.wait()
        answers[index] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers


def one_won(answers, won: int) -> None:
    statuses = sorted(a.status_code for a in answers)
    assert statuses == sorted([won, 409]), [(a.status_code, a.text[:300]) for a in answers]
    [lost] = [a for a in answers if a.status_code == 409]
    assert lost.json()["error"]["type"] == "CommitFailedException"


def test_two_registers_of_one_table_race_to_one_success_and_one_409(lake):
    local, _folder = external_catalog("race")
    local.create_namespace("shop")
    for round_number in range(ROUNDS):
        table = local.create_table(f"shop.t{round_number}", KEYLESS)
        table.append(rows([round_number]).cast(KEYLESS.as_arrow()))
        location = local.load_table(f"shop.t{round_number}").metadata_location
        answers = racing(*(
            lambda name=name, location=location: requests.post(f"{lake.base}{REGISTER}", headers=lake.headers,
                                            json={"name": name, "metadata-location": location})
            for name in (f"a{round_number}", f"b{round_number}")
        ))  # fmt: skip
        one_won(answers, 200)
    assert len(lake.main.list_tables("shop")) == ROUNDS + 1


def test_two_transactions_and_two_commits_on_one_table_race_to_one_success_and_one_409(lake):
    from tests.catalog_app.test_iceberg_writes import table_change

    url = f"{lake.base}/transactions/commit"
    for round_number in range(ROUNDS):
        orders = lake.main.load_table("shop.orders")
        first, second = orders.transaction(), orders.transaction()
        first.append(rows([1000 + round_number]))
        second.append(rows([2000 + round_number]))
        bodies = [{"table-changes": [table_change(orders, t)]} for t in (first, second)]
        answers = racing(*(lambda body=body: requests.post(url, headers=lake.headers, json=body) for body in bodies))
        one_won(answers, 204)
        # and as two commitTable calls
        orders = lake.main.load_table("shop.orders")
        first, second = orders.transaction(), orders.transaction()
        first.append(rows([3000 + round_number]))
        second.append(rows([4000 + round_number]))
        bodies = [{k: v for k, v in table_change(orders, t).items() if k != "identifier"} for t in (first, second)]
        answers = racing(*(lambda body=body: requests.post(f"{lake.base}{ORDERS}", headers=lake.headers, json=body)
                           for body in bodies))  # fmt: skip
        one_won(answers, 200)
    assert len(api_rows(lake.client, "main", "shop.orders")[1]) == 5 + 2 * ROUNDS


def test_a_refused_transaction_leaves_no_file_of_its_own_behind(lake):
    """A transaction whose first table is a copy-on-write delete (LakeUI writes a delta file of the positions it
    deletes) and whose second table is refused: the delta file is removed again, nothing is committed."""
    from tests.catalog_app.test_iceberg_writes import table_change

    events = lake.main.create_table("shop.events", KEYLESS)
    orders = lake.main.load_table("shop.orders")
    delete = orders.transaction()
    delete.delete("id = 1")  # pyiceberg rewrites the file: 4 of its 5 rows kept
    junk = Path(events.properties["write.data.path"]) / "junk.parquet"
    junk.parent.mkdir(parents=True, exist_ok=True)
    junk.write_text("not parquet")
    append = events.transaction()
    with append.update_snapshot().fast_append() as fast:
        data_file = DataFile.from_args(
            _table_format_version=2, content=DataFileContent.DATA, file_path=str(junk), file_format=FileFormat.PARQUET,
            partition=Record(), record_count=1, file_size_in_bytes=junk.stat().st_size,
        )  # fmt: skip
        data_file.spec_id = 0
        fast.append_data_file(data_file)
    body = {"table-changes": [table_change(orders, delete), table_change(events, append)]}
    refused(lake, "/transactions/commit", body, says="junk.parquet")
    assert [r[0] for r in api_rows(lake.client, "main", "shop.orders")[1]] == [0, 1, 2, 3, 4]
