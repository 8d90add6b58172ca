"""The Iceberg REST catalog's write half against a live server, written by pyiceberg's RestCatalog: namespaces and
tables created, commits recorded as LakeUI operations on the branch the URI names (never a copy of data), and the
refusals (tags, commit ids, protected branches, viewers, bad files) with nothing committed."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.backends.utils import CursorWrapper
from lakeui_client import Client
from pyiceberg.catalog.rest import CommitTableRequest, TableIdentifier
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType
from rest_framework.authtoken.models import Token

from catalog_app.models import DataFile as LakeFile
from catalog_app.selectors.refs import catalog_get, commit_chain, commit_log, ref_resolve
from catalog_app.selectors.table_files import tables_file_rows

# The live server's token and client fixtures are test_iceberg_rest's (imported, so tests name them as arguments).
from tests.catalog_app.test_iceberg_rest import api_rows, client, iceberg, iceberg_rows, json_rows, token  # noqa: F401

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "amount", IntegerType(), required=False),
    NestedField(3, "region", StringType(), required=False),
    identifier_field_ids=[1],
)
KEYLESS = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "amount", IntegerType(), required=False),
    NestedField(3, "region", StringType(), required=False),
)
ARROW = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("amount", pa.int32()),
    pa.field("region", pa.string()),
])  # fmt: skip


def rows(ids, region="eu", amount=None) -> pa.Table:
    ids = list(ids)
    return pa.Table.from_pylist(
        [{"id": i, "amount": amount if amount is not None else i, "region": region} for i in ids], schema=ARROW
    )


def append_files(table, path: Path, content=DataFileContent.DATA, **extra) -> None:
    """An append naming a file as it is, unread (pyiceberg's add_files reads and checks files itself first); with
    `content`, a delete file (pyiceberg writes none itself)."""
    data_file = DataFile.from_args(
        _table_format_version=2, content=content, file_path=str(path), file_format=FileFormat.PARQUET,
        partition=Record(), record_count=1, file_size_in_bytes=path.stat().st_size, **extra,
    )  # fmt: skip
    data_file.spec_id = 0
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)


def keyed_orders(live_server, client: Client, token: str):
    """Catalog `lake`, its main branch through pyiceberg, and shop.orders (keyed by id) holding ids 0-4."""
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    orders = main.create_table("shop.orders", SCHEMA)
    orders.append(rows(range(5)))
    return main, orders


def commit_page_counts(client: Client, commit_id: str) -> dict:
    """What the commit's operations say it did to each table's rows (the commit page's figures)."""
    commit = client.commit("lake", commit_id)
    counts = {"rows_inserted": 0, "rows_deleted": 0}
    for operation in commit["operations"]:
        for key in counts:
            counts[key] += (operation.get("details") or {}).get(key, 0)
    return counts


def test_namespaces_tables_and_appends_through_pyiceberg(live_server, client, token, user):
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop", {"owner": "data"})
    with pytest.raises(NamespaceAlreadyExistsError):
        main.create_namespace("shop")
    assert main.list_namespaces() == [("shop",)]
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="region"))
    orders = main.create_table("shop.orders", SCHEMA, partition_spec=spec)
    columns = client.columns("lake", "main", "shop.orders")
    assert [(c["id"], c["name"], c["type"], c["nullable"]) for c in columns] == [
        (1, "id", "long", False), (2, "amount", "int", True), (3, "region", "string", True)]  # fmt: skip
    assert client.table("lake", "main", "shop.orders")["primary_key"] == ["id"]
    assert orders.schema().identifier_field_ids == [1]
    write_path = orders.properties["write.data.path"]
    catalog_id = client.catalog("lake")["id"]
    assert write_path.startswith(str(Path(settings.LAKEUI_WAREHOUSE).resolve() / catalog_id))
    assert "/writes/" in write_path

    # an append: an insert of the engine's own files as segments, zero-copy, with footer statistics
    orders.append(rows(range(10), "eu"))
    orders.append(rows(range(10, 15), "us"))
    assert api_rows(client, "main", "shop.orders")[1] == sorted(
        [(i, i, "eu") for i in range(10)] + [(i, i, "us") for i in range(10, 15)], key=repr
    )
    assert iceberg_rows(main, "shop.orders")[1] == api_rows(client, "main", "shop.orders")[1]
    log = client.commits("lake", "main")
    assert log[0]["author"] == user.username and log[0]["message"].startswith("Iceberg commit")
    assert commit_page_counts(client, log[0]["id"]) == {"rows_inserted": 5, "rows_deleted": 0}
    segments = LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT)
    assert segments.count() == 2 and all("/writes/" in s.path for s in segments)
    us = segments.get(partition_values={"3": "us"})
    assert us.stats["1"] == {"min": 10, "max": 14, "nulls": 0}

    # a filtered scan of pyiceberg reads the partition it names
    assert sorted(main.load_table("shop.orders").scan(row_filter=EqualTo("region", "us")).to_arrow()["id"].to_pylist()) == [
        10, 11, 12, 13, 14]  # fmt: skip

    # the manifests carry each file's column bounds and counts: a filter on a column that is no partition skips
    # the files it rules out
    scan = main.load_table("shop.orders").scan(row_filter=LessThan("id", 3))
    [planned] = scan.plan_files()
    assert planned.file.record_count == 10 and planned.file.null_value_counts[1] == 0
    assert planned.file.value_counts[3] == 10 and planned.file.lower_bounds[3] == b"eu"

    # rename and drop
    main.rename_table("shop.orders", "shop.sales")
    assert main.list_tables("shop") == [("shop", "sales")]
    assert len(iceberg_rows(main, "shop.sales")[1]) == 15
    main.drop_table("shop.sales")
    with pytest.raises(NoSuchTableError):
        main.load_table("shop.sales")
    main.drop_namespace("shop")
    assert main.list_namespaces() == []


def test_copy_on_write_delete_and_overwrite_are_row_changes(live_server, client, token):
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    events = main.create_table("shop.events", KEYLESS)
    events.append(rows(range(10)).cast(KEYLESS.as_arrow()))
    segment = LakeFile.objects.get(kind=LakeFile.Kind.SEGMENT)

    events.delete(LessThan("id", 3))  # pyiceberg rewrites the file: 3 rows deleted, the file itself kept
    assert [r[0] for r in api_rows(client, "main", "shop.events")[1]] == list(range(3, 10))
    head = client.commits("lake", "main")[0]["id"]
    assert commit_page_counts(client, head) == {"rows_inserted": 0, "rows_deleted": 3}
    assert LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT).count() == 1  # the rewrite is no new segment
    assert LakeFile.objects.get(kind=LakeFile.Kind.DELTA).segment_id == segment.id
    assert iceberg_rows(main, "shop.events")[1] == api_rows(client, "main", "shop.events")[1]

    # overwrite with a filter: rows of id 5 replaced by one new row
    events = main.load_table("shop.events")
    events.overwrite(rows([50], "us").cast(KEYLESS.as_arrow()), overwrite_filter=EqualTo("id", 5))
    after = api_rows(client, "main", "shop.events")[1]
    assert [r[0] for r in after] == sorted([3, 4, 6, 7, 8, 9, 50], key=repr)
    head = client.commits("lake", "main")[0]["id"]
    assert commit_page_counts(client, head) == {"rows_inserted": 1, "rows_deleted": 1}
    assert iceberg_rows(main, "shop.events")[1] == after

    # the whole table replaced: an overwrite
    main.load_table("shop.events").overwrite(rows([100, 101]).cast(KEYLESS.as_arrow()))
    assert [r[0] for r in api_rows(client, "main", "shop.events")[1]] == [100, 101]
    operations = client.commit("lake", client.commits("lake", "main")[0]["id"])["operations"]
    assert [o["op"] for o in operations if o["op"] != "alter_properties"] == ["overwrite"]


def test_refusals_leave_nothing_committed(live_server, client, token, user):
    main, _ = keyed_orders(live_server, client, token)
    head = client.commits("lake", "main")[0]["id"]
    client.tag_create("lake", "v1", "main")

    # a tag and a commit id are read-only
    for ref in ("v1", head):
        with pytest.raises(ForbiddenError):
            iceberg(live_server, token, ref).create_namespace("other")
        with pytest.raises(ForbiddenError):
            iceberg(live_server, token, ref).load_table("shop.orders").append(rows([99]))
    # a doubled key: in the file itself, and against the table's rows
    with pytest.raises(BadRequestError, match="twice"):
        main.load_table("shop.orders").append(rows([1, 2]))
    with pytest.raises(BadRequestError, match="twice"):
        main.load_table("shop.orders").append(rows([7, 7]))
    # two writers: the one that loaded the table before the other committed gets a 409, and pyiceberg's retry
    # (reload, commit again) succeeds; no row lost or doubled
    stale = main.load_table("shop.orders")
    stale_snapshot = stale.metadata.current_snapshot_id
    main.load_table("shop.orders").append(rows([10]))
    stale.append(rows([11]))
    assert [r[0] for r in api_rows(client, "main", "shop.orders")[1]] == [0, 1, 10, 11, 2, 3, 4]
    moved = client.commits("lake", "main")[0]["id"]
    base = f"{live_server.url}/iceberg/lake/main/v1/namespaces/shop/tables/orders"
    headers = {"Authorization": f"Bearer {token}"}
    requirement = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": stale_snapshot}
    refused = requests.post(base, headers=headers, json={"requirements": [requirement], "updates": []})
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "CommitFailedException"
    requirement["snapshot-id"] = main.load_table("shop.orders").metadata.current_snapshot_id
    unchanged = requests.post(base, headers=headers, json={"requirements": [requirement], "updates": []})
    assert unchanged.status_code == 200 and client.commits("lake", "main")[0]["id"] == moved  # nothing to commit
    # a file outside the location, a non-Parquet file, a wrong type, a null in a NOT NULL column
    loaded = requests.get(base, headers=headers).json()
    write_path = Path(loaded["metadata"]["properties"]["write.data.path"])
    write_path.mkdir(parents=True, exist_ok=True)
    bad_files = {
        "not parquet": (write_path / "junk.parquet", None),
        "int for long": (write_path / "typed.parquet", pa.schema([pa.field("id", pa.int32(), False)])),
        "null key": (write_path / "nulls.parquet", ARROW),
    }
    (write_path / "junk.parquet").write_text("not parquet")
    with_ids = lambda schema: pa.schema([f.with_metadata({b"PARQUET:field_id": str(i + 1).encode()})  # noqa: E731
                                         for i, f in enumerate(schema)])  # fmt: skip
    pq.write_table(pa.table({"id": pa.array([20], pa.int32())}, schema=with_ids(bad_files["int for long"][1])),
                   write_path / "typed.parquet")  # fmt: skip
    nullable = with_ids(pa.schema([pa.field("id", pa.int64()), pa.field("amount", pa.int32()),
                                   pa.field("region", pa.string())]))  # fmt: skip
    pq.write_table(pa.table({"id": [None], "amount": [1], "region": ["eu"]}, schema=nullable),
                   write_path / "nulls.parquet")  # fmt: skip
    for reason, (path, _) in bad_files.items():
        with pytest.raises(BadRequestError) as refused:
            append_files(main.load_table("shop.orders"), path)
        assert "Data file" in str(refused.value), reason
    outside = Path(settings.LAKEUI_WAREHOUSE).resolve() / "elsewhere.parquet"
    pq.write_table(rows([30]).cast(with_ids(ARROW)), outside)
    with pytest.raises(BadRequestError, match="not under"):
        append_files(main.load_table("shop.orders"), outside)
    assert client.commits("lake", "main")[0]["id"] == moved
    assert len(api_rows(client, "main", "shop.orders")[1]) == 7

    # a protected branch takes no direct commit; a viewer writes nothing
    client.branch_protect("lake", "main")
    with pytest.raises(ForbiddenError, match="protected"):
        main.load_table("shop.orders").append(rows([40]))
    bob = get_user_model().objects.create_user("bob")
    client.role_grant("lake", "bob", "viewer")
    client.branch_create("lake", "dev", source="main")
    as_bob = iceberg(live_server, Token.objects.create(user=bob).key, "dev")
    assert len(iceberg_rows(as_bob, "shop.orders")[1]) == 7
    with pytest.raises(ForbiddenError):
        as_bob.load_table("shop.orders").append(rows([41]))
    assert client.commits("lake", "main")[0]["id"] == moved


def table_change(table, transaction) -> dict:
    """What pyiceberg would commit for one table of a transaction, as commitTransaction's body names it."""
    request = CommitTableRequest(
        identifier=TableIdentifier(namespace=list(table.name()[:-1]), name=table.name()[-1]),
        requirements=transaction._requirements, updates=transaction._updates,
    )  # fmt: skip
    return json.loads(request.model_dump_json())


def test_schema_updates_upsert_and_a_multi_table_transaction(live_server, client, token):
    main, orders = keyed_orders(live_server, client, token)

    # add, rename, widen, drop: alter_column operations by field id
    with orders.update_schema() as update:
        update.add_column("channel", StringType())
        update.rename_column("region", "area")
        update.update_column("amount", LongType())
    with main.load_table("shop.orders").update_schema() as update:
        update.delete_column("channel")
    columns = client.columns("lake", "main", "shop.orders")
    assert [(c["id"], c["name"], c["type"]) for c in columns] == [(1, "id", "long"), (2, "amount", "long"),
                                                                 (3, "area", "string")]  # fmt: skip
    commits = client.commits("lake", "main")
    actions = [o["details"]["action"] for c in commits[1::-1] for o in client.commit("lake", c["id"])["operations"]]
    assert sorted(actions[:3]) == ["add", "rename", "widen"] and actions[3:] == ["drop"]
    orders = main.load_table("shop.orders")
    assert [f.name for f in orders.schema().fields] == ["id", "amount", "area"]
    assert iceberg_rows(main, "shop.orders")[1] == api_rows(client, "main", "shop.orders")[1]

    # upsert by the identifier fields: 2 rows updated, 2 inserted
    changed = pa.Table.from_pylist(
        [{"id": 3, "amount": 300, "area": "us"}, {"id": 4, "amount": 4, "area": "eu"},
         {"id": 1, "amount": 100, "area": "eu"}, {"id": 7, "amount": 7, "area": "us"},
         {"id": 8, "amount": 8, "area": "us"}],
        schema=orders.schema().as_arrow(),
    )  # fmt: skip
    result = orders.upsert(changed)
    assert (result.rows_updated, result.rows_inserted) == (2, 2)
    after = api_rows(client, "main", "shop.orders")[1]
    assert after == sorted([(0, 0, "eu"), (1, 100, "eu"), (2, 2, "eu"), (3, 300, "us"), (4, 4, "eu"),
                            (7, 7, "us"), (8, 8, "us")], key=repr)  # fmt: skip
    assert iceberg_rows(main, "shop.orders")[1] == after
    head = client.commits("lake", "main")[0]["id"]
    assert commit_page_counts(client, head) == {"rows_inserted": 4, "rows_deleted": 2}

    # two tables in one commitTransaction: one LakeUI commit, or none
    events = main.create_table("shop.events", KEYLESS)
    orders = main.load_table("shop.orders")
    first, second = orders.transaction(), events.transaction()
    first.append(pa.Table.from_pylist([{"id": 20, "amount": 1, "area": "eu"}], schema=orders.schema().as_arrow()))
    second.append(rows([1, 2]).cast(KEYLESS.as_arrow()))
    body = {"table-changes": [table_change(orders, first), table_change(events, second)]}
    url = f"{live_server.url}/iceberg/lake/main/v1/transactions/commit"
    before = len(client.commits("lake", "main"))
    answer = requests.post(url, headers={"Authorization": f"Bearer {token}"}, json=body)
    assert answer.status_code == 204, answer.text
    assert len(client.commits("lake", "main")) == before + 1
    assert len(api_rows(client, "main", "shop.orders")[1]) == 8 and len(api_rows(client, "main", "shop.events")[1]) == 2
    # replayed: the orders requirement fails now, so neither table changes
    answer = requests.post(url, headers={"Authorization": f"Bearer {token}"}, json=body)
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "CommitFailedException"
    assert len(client.commits("lake", "main")) == before + 1


def test_a_schema_change_and_data_in_one_commit(live_server, client, token):
    main, _ = keyed_orders(live_server, client, token)
    client.branch_create("lake", "dev", source="main")
    with main.load_table("shop.orders").transaction() as transaction:
        with transaction.update_schema() as update:
            update.add_column("note", StringType())
        transaction.append(pa.Table.from_pylist([{"id": 50, "amount": 5, "region": "eu", "note": "new"}],
                                                schema=transaction.table_metadata.schema().as_arrow()))  # fmt: skip
    head = client.commits("lake", "main")[0]["id"]
    assert [o["op"] for o in client.commit("lake", head)["operations"]] == ["alter_column", "insert"]
    names, rows_now = api_rows(client, "main", "shop.orders")
    assert names == ["id", "amount", "region", "note"] and (50, 5, "eu", "new") in rows_now and len(rows_now) == 6
    assert iceberg_rows(main, "shop.orders") == (names, rows_now)

    # on dev the engine numbers its new column 4, but LakeUI gave id 4 to main's column (ids are never reused on
    # any branch): refused with the reason, nothing committed
    dev = iceberg(live_server, token, "dev")
    before = client.commits("lake", "dev")[0]["id"]
    transaction = dev.load_table("shop.orders").transaction()
    with transaction.update_schema() as update:
        update.add_column("other", StringType())
    transaction.append(pa.Table.from_pylist([{"id": 60, "amount": 6, "region": "eu", "other": "x"}],
                                            schema=transaction.table_metadata.schema().as_arrow()))  # fmt: skip
    with pytest.raises(BadRequestError, match="commit the schema change first"):
        transaction.commit_transaction()
    assert client.commits("lake", "dev")[0]["id"] == before


def upsert(catalog, name: str, changed: list[dict]) -> None:
    table = catalog.load_table(name)
    table.upsert(pa.Table.from_pylist(changed, schema=table.schema().as_arrow()))


def test_branches_written_by_pyiceberg_merge_by_key_and_cell(live_server, client, token, celery_worker):
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    main.create_table("shop.orders", SCHEMA).append(rows(range(1, 7)))
    for branch in ("a", "b"):
        client.branch_create("lake", branch, source="main")
    a, b = iceberg(live_server, token, "a"), iceberg(live_server, token, "b")
    upsert(a, "shop.orders", [{"id": 1, "amount": 100, "region": "eu"}, {"id": 20, "amount": 20, "region": "eu"}])
    upsert(b, "shop.orders", [{"id": 1, "amount": 1, "region": "us"}, {"id": 2, "amount": 2, "region": "us"},
                              {"id": 30, "amount": 30, "region": "us"}])  # fmt: skip
    b.load_table("shop.orders").delete(EqualTo("id", 6))
    # the same cell changed differently on both: key 3's amount
    upsert(a, "shop.orders", [{"id": 3, "amount": 33, "region": "eu"}])
    upsert(b, "shop.orders", [{"id": 3, "amount": 333, "region": "eu"}])

    assert client.merge("lake", "a", "main")["status"] == "succeeded"
    request = client.merge_request_open("lake", "b", "main", "b into main")
    assert request["status"]["unresolved_conflicts"], request["status"]
    [key] = client.diff_keys("lake", "b", "main", "shop.orders")
    assert json.dumps(key, default=str).count("333") and json.dumps(key, default=str).count("33")
    client.merge_request_resolve("lake", request["number"], {"keys": {"shop.orders": {"[3]": "source_wins"}}})
    client.wait(client.merge_request("lake", request["number"])["plan_job"]["id"])
    merged = client.merge_request_merge("lake", request["number"])
    assert merged["status"] == "succeeded", merged
    expected = sorted([(1, 100, "us"), (2, 2, "us"), (3, 333, "eu"), (4, 4, "eu"), (5, 5, "eu"), (20, 20, "eu"),
                       (30, 30, "us")], key=repr)  # fmt: skip
    assert api_rows(client, "main", "shop.orders")[1] == expected  # different keys, different cells of key 1
    assert iceberg_rows(iceberg(live_server, token, "main"), "shop.orders")[1] == expected


def test_delete_files_written_by_an_engine(live_server, client, token):
    main, orders = keyed_orders(live_server, client, token)
    folder = Path(orders.properties["write.data.path"])
    segment = table_uri_of(orders)
    # a position delete file: positions of the segment it names
    positions = folder / "positions.parquet"
    pq.write_table(pa.table({"file_path": [segment], "pos": pa.array([0], pa.int64())}, schema=pa.schema([
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"})])), positions)  # fmt: skip
    append_files(main.load_table("shop.orders"), positions, content=DataFileContent.POSITION_DELETES)
    assert [r[0] for r in api_rows(client, "main", "shop.orders")[1]] == [1, 2, 3, 4]
    head = client.commits("lake", "main")[0]["id"]
    assert commit_page_counts(client, head) == {"rows_inserted": 0, "rows_deleted": 1}

    # an equality delete file by the primary key: a delete by key
    by_key = folder / "keys.parquet"
    pq.write_table(pa.table({"id": pa.array([2, 3, 99], pa.int64())}, schema=pa.schema([
        pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})])), by_key)  # fmt: skip
    append_files(main.load_table("shop.orders"), by_key, content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])
    assert [r[0] for r in api_rows(client, "main", "shop.orders")[1]] == [1, 4]
    assert iceberg_rows(main, "shop.orders")[1] == api_rows(client, "main", "shop.orders")[1]

    # by another column, or on a table without a key: refused, nothing committed
    head = client.commits("lake", "main")[0]["id"]
    by_amount = folder / "amounts.parquet"
    pq.write_table(pa.table({"amount": pa.array([1], pa.int32())}, schema=pa.schema([
        pa.field("amount", pa.int32(), True, {b"PARQUET:field_id": b"2"})])), by_amount)  # fmt: skip
    with pytest.raises(BadRequestError, match="primary key"):
        append_files(main.load_table("shop.orders"), by_amount, content=DataFileContent.EQUALITY_DELETES,
                     equality_ids=[2])  # fmt: skip
    assert client.commits("lake", "main")[0]["id"] == head


def table_uri_of(table) -> str:
    """The location of the table's one data file."""
    [task] = table.scan().plan_files()
    return task.file.file_path


def test_a_staged_create_is_committed_with_its_data(live_server, client, token):
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="region"))
    staged = main.create_table_transaction("shop.orders", SCHEMA, partition_spec=spec)
    assert main.list_tables("shop") == []  # staged: nothing stored yet
    staged.append(rows(range(5)))
    orders = staged.commit_transaction()
    # one commit: the table created and its first files inserted where the engine wrote them
    assert api_rows(client, "main", "shop.orders")[1] == [(i, i, "eu") for i in range(5)]
    assert iceberg_rows(main, "shop.orders")[1] == api_rows(client, "main", "shop.orders")[1]
    head = client.commits("lake", "main")[0]["id"]
    assert [o["op"] for o in client.commit("lake", head)["operations"]] == ["create", "insert"]
    table = client.table("lake", "main", "shop.orders")
    assert (table["primary_key"], table["partition_by"]) == (["id"], ["region"])
    assert all("/writes/" in f.path for f in LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT))
    assert orders.metadata.table_uuid == main.load_table("shop.orders").metadata.table_uuid

    # two staged creates of one name: the first commit creates it, the other answers 409; a name taken is refused
    first, second = (main.create_table_transaction("shop.events", KEYLESS) for _ in range(2))
    first.commit_transaction()
    with pytest.raises(CommitFailedException):
        second.commit_transaction()
    with pytest.raises(TableAlreadyExistsError):
        main.create_table_transaction("shop.events", KEYLESS)
    assert main.list_tables("shop") == [("shop", "events"), ("shop", "orders")]


def external_catalog(name: str):
    """pyiceberg's own SqlCatalog (SQLite), its warehouse a fresh folder under the folder tables are registered from
    (LAKEUI_ICEBERG_REGISTER_ROOTS' default, `external`)."""
    from pyiceberg.catalog.sql import SqlCatalog

    folder = Path(os.path.abspath(settings.LAKEUI_WAREHOUSE)) / "external" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    return SqlCatalog(name, uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}"), folder


def test_a_table_written_by_sqlcatalog_is_registered_without_copying(live_server, client, token, celery_worker):
    local, folder = external_catalog("local")
    local.create_namespace("shop")
    table = local.create_table("shop.events", KEYLESS)
    table.append(rows(range(10)).cast(KEYLESS.as_arrow()))
    table.delete(LessThan("id", 3))  # copy-on-write: a rewritten file of 7 rows
    table = local.load_table("shop.events")
    table.append(rows(range(10, 13)).cast(KEYLESS.as_arrow()))
    # and a position delete file of the table's own (pyiceberg writes none itself, it reads them): id 11's row
    table = local.load_table("shop.events")
    newest = next(t.file.file_path for t in table.scan(row_filter=EqualTo("id", 11)).plan_files())
    positions = folder / "shop" / "events" / "data" / "positions.parquet"
    pq.write_table(pa.table({"file_path": [newest], "pos": pa.array([1], pa.int64())}, schema=pa.schema([
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"})])), positions)  # fmt: skip
    append_files(table, positions, content=DataFileContent.POSITION_DELETES)
    expected = [(i, i, "eu") for i in [*range(3, 10), 10, 12]]
    assert iceberg_rows_of(local.load_table("shop.events")) == sorted(expected, key=repr)
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}

    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    registered = main.register_table("shop.events", local.load_table("shop.events").metadata_location)
    assert api_rows(client, "main", "shop.events")[1] == sorted(expected, key=repr)
    assert iceberg_rows(main, "shop.events")[1] == api_rows(client, "main", "shop.events")[1]
    assert registered.scan().to_arrow().num_rows == 9
    # one commit: the table created, its data files inserted where they lie, the position delete as a delete
    [commit, *_] = client.commits("lake", "main")
    assert commit["message"].startswith("Register Iceberg table shop.events")
    assert commit_page_counts(client, commit["id"]) == {"rows_inserted": 10, "rows_deleted": 1}
    segments = LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT)
    data_files = sorted(str(p) for p in folder.rglob("*.parquet") if p.name != "positions.parquet")
    live = sorted(t.file.file_path.removeprefix("file://") for t in local.load_table("shop.events").scan().plan_files())
    assert sorted(str(Path(os.path.abspath(settings.LAKEUI_WAREHOUSE)) / s.path) for s in segments) == live
    assert len(live) == 2 and len(data_files) == 3  # the file the rewrite replaced is not registered
    catalog_id = client.catalog("lake")["id"]
    copied = [p for p in (Path(settings.LAKEUI_WAREHOUSE) / catalog_id).rglob("*.parquet") if "/deltas/" not in str(p)]
    assert copied == [] or all("/iceberg/" in str(p) for p in copied)  # no data file copied (served deletes aside)

    # a branch of it takes writes as any table does, and GC collects none of the registered files
    client.branch_create("lake", "dev", source="main")
    iceberg(live_server, token, "dev").load_table("shop.events").delete(EqualTo("id", 12))
    assert [r[0] for r in api_rows(client, "dev", "shop.events")[1]] == [10, 3, 4, 5, 6, 7, 8, 9]
    assert len(api_rows(client, "main", "shop.events")[1]) == 9
    time.sleep(1.5)
    job = client.gc("lake", grace_hours=1 / 3600)
    # it ran: the engine's rewrite of the registered file held no new row, so it is no segment and is collected
    assert job["status"] == "succeeded" and job["result"]["files_removed"] >= 1, job
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before
    assert len(api_rows(client, "main", "shop.events")[1]) == 9

    # registered once: the same files again are refused
    with pytest.raises(TableAlreadyExistsError, match="registered once"):
        main.register_table("shop.again", local.load_table("shop.events").metadata_location)


def iceberg_rows_of(table) -> list[tuple]:
    return json_rows(table.scan().to_arrow())[1]


def test_register_refuses_what_is_not_where_tables_are_registered_from(live_server, client, token):
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    orders = main.create_table("shop.orders", SCHEMA)
    orders.append(rows(range(3)))
    head = client.commits("lake", "main")[0]["id"]
    # a LakeUI table's own metadata (its catalog's folder), a path climbing out, a file outside the warehouse
    outside = Path(os.path.abspath(settings.LAKEUI_WAREHOUSE)).parent / "elsewhere.metadata.json"
    for location in (main.load_table("shop.orders").metadata_location,
                     f"file://{os.path.abspath(settings.LAKEUI_WAREHOUSE)}/external/../{client.catalog('lake')['id']}/x.json",
                     f"file://{outside}"):  # fmt: skip
        with pytest.raises(ForbiddenError, match="LAKEUI_ICEBERG_REGISTER_ROOTS"):
            main.register_table("shop.copy", location)
    # a table under the folder whose files escape it: refused before any is opened
    local, folder = external_catalog("escape")
    local.create_namespace("shop")
    local.create_table("shop.t", KEYLESS).append(rows([1]).cast(KEYLESS.as_arrow()))
    metadata = json.loads(Path(local.load_table("shop.t").metadata_location.removeprefix("file://")).read_text())
    for snapshot in metadata["snapshots"]:
        snapshot["manifest-list"] = f"file://{outside}"
    forged = folder / "forged.metadata.json"
    forged.write_text(json.dumps(metadata))
    with pytest.raises(BadRequestError, match="not under a folder tables are registered from"):
        main.register_table("shop.forged", f"file://{forged}")
    # equality deletes: by the identifier fields, a delete by key; by another column, refused
    keyed = local.create_table("shop.keyed", SCHEMA)
    keyed.append(rows(range(5)))
    by_key = folder / "keys.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 3], pa.int64())}, schema=pa.schema([
        pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})])), by_key)  # fmt: skip
    append_files(local.load_table("shop.keyed"), by_key, content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])
    main.register_table("shop.keyed", local.load_table("shop.keyed").metadata_location)
    assert [r[0] for r in api_rows(client, "main", "shop.keyed")[1]] == [0, 2, 4]
    assert iceberg_rows(main, "shop.keyed")[1] == api_rows(client, "main", "shop.keyed")[1]
    head = client.commits("lake", "main")[0]["id"]
    by_amount = folder / "amounts.parquet"
    pq.write_table(pa.table({"amount": pa.array([2], pa.int32())}, schema=pa.schema([
        pa.field("amount", pa.int32(), True, {b"PARQUET:field_id": b"2"})])), by_amount)  # fmt: skip
    other = local.create_table("shop.other", SCHEMA)
    other.append(rows(range(3)))
    append_files(local.load_table("shop.other"), by_amount, content=DataFileContent.EQUALITY_DELETES,
                 equality_ids=[2])  # fmt: skip
    with pytest.raises(BadRequestError, match="primary key"):
        main.register_table("shop.other", local.load_table("shop.other").metadata_location)
    # a tag is read-only
    client.tag_create("lake", "v1", "main")
    with pytest.raises(ForbiddenError):
        iceberg(live_server, token, "v1").register_table("shop.t", local.load_table("shop.t").metadata_location)
    assert client.commits("lake", "main")[0]["id"] == head


def test_an_iceberg_append_costs_the_same_few_queries_however_long_the_tables_history(
    live_server, client, token, monkeypatch
):
    """The server's queries for one pyiceberg append (its commit request, in a thread of the live server): the
    token, catalog and ref in one, the table with its database in one, and so on (docs/iceberg.md, "What a commit
    costs"); the same after 3 commits as after 12. Before issue 57's changes one cost 44 queries."""
    _, orders = keyed_orders(live_server, client, token)
    counts: dict[int, int] = {}
    execute = CursorWrapper._execute

    def counted(self, sql, params, *rest):
        thread = threading.get_ident()
        counts[thread] = counts.get(thread, 0) + 1
        return execute(self, sql, params, *rest)

    monkeypatch.setattr(CursorWrapper, "_execute", counted)
    costs = []
    for first in range(10, 130, 10):
        counts.clear()
        orders.append(rows(range(first, first + 10)))
        (served,) = [n for thread, n in counts.items() if thread != threading.get_ident()]  # the commit's request
        costs.append(served)
    assert costs[2] == costs[-1] <= 18, costs
    held = sorted(orders.scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
    assert held == [*range(5), *range(10, 130)]

    # The table's files are read in plain SQL (whole tables); the ORM's query (a list of segments) finds the same at
    # every commit, with deletes (delete files, emptied segments) and an upsert among them.
    monkeypatch.undo()
    orders.delete(LessThan("id", 15))
    orders.delete(EqualTo("id", 20))
    orders.upsert(rows([21, 22, 200]))
    catalog = catalog_get(name="lake")
    table_id = LakeFile.objects.filter(catalog=catalog).values_list("table_id", flat=True).first()
    every = list(LakeFile.objects.filter(table_id=table_id, kind="segment").values_list("id", flat=True))
    for commit in commit_log(ref_resolve(catalog=catalog, ref="main").chain):
        chain = commit_chain(commit)
        whole = tables_file_rows(chain, table_ids=[table_id])
        assert whole == tables_file_rows(chain, table_ids=[table_id], segments=every), commit.message
