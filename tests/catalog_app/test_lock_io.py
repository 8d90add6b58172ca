"""No file work under the catalog lock: a writer prepares its files (reads manifests and footers, checks keys,
writes delete files and metadata) before it takes the lock, and under the lock only checks that the state it read
is still the one and records rows. The lock (catalog_app/services/commits.py `catalog_lock`, held until the
transaction that took it ends) and the warehouse's file layer (`arrow_filesystem`, through which LakeUI's engine
opens every warehouse file, and pyiceberg's FileIO for manifests and metadata) are instrumented per thread here;
the live server answers in threads of this process, and the data jobs, merges, picks, restores and expiries below
run in the test's own thread. Each case also checks that the lock was taken in the instrumented threads, so none
passes by watching the wrong process."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import sys
import threading
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.db import transaction
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent

from catalog_app.engine import warehouse
from catalog_app.services import commits
from tests.catalog_app.test_iceberg_rest import client, iceberg, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import SCHEMA, append_files, external_catalog, keyed_orders, rows


@pytest.fixture
def under_lock(monkeypatch) -> SimpleNamespace:
    """`opened`: the warehouse files opened by a thread while it holds the catalog lock; `locks`: how many times a
    thread took it."""
    held: set[int] = set()
    seen = SimpleNamespace(opened=[], locks=0)
    lock = commits.catalog_lock

    def locked(*, catalog, **mode):
        taken = lock(catalog=catalog, **mode)
        thread = threading.get_ident()
        held.add(thread)
        seen.locks += 1
        transaction.on_commit(lambda: held.discard(thread))  # released with the transaction
        return taken

    def noted(what: str) -> None:
        thread = threading.get_ident()
        if thread in held and not transaction.get_connection().in_atomic_block:
            held.discard(thread)  # its transaction rolled back: the lock went with it
        if thread in held:
            seen.opened.append(what)

    opened = warehouse.arrow_filesystem

    def filesystem(uri):
        noted(uri)
        return opened(uri)

    for name, module in list(sys.modules.items()):  # every module that imported them holds its own names for them
        if not name.startswith(("catalog_app.", "merge_app.")):
            continue
        if getattr(module, "arrow_filesystem", None) is opened:
            monkeypatch.setattr(module, "arrow_filesystem", filesystem)
        if getattr(module, "catalog_lock", None) is lock:
            monkeypatch.setattr(module, "catalog_lock", locked)
    for method in ("new_input", "new_output"):
        original = getattr(PyArrowFileIO, method)

        def wrapped(self, location, _original=original):
            noted(location)
            return _original(self, location)

        monkeypatch.setattr(PyArrowFileIO, method, wrapped)
    return seen


def nothing_opened(under_lock, *, locks: int = 1) -> None:
    assert under_lock.opened == []
    assert under_lock.locks >= locks  # the writer ran where the instrument sees it


def test_an_iceberg_commit_opens_no_file_under_the_catalog_lock(live_server, client, token, under_lock):
    main, _ = keyed_orders(live_server, client, token)
    under_lock.opened.clear()
    under_lock.locks = 0
    main.load_table("shop.orders").append(rows([10, 11]))
    orders = main.load_table("shop.orders")
    orders.delete("id = 1")  # copy-on-write: LakeUI writes a delta file of the position
    orders = main.load_table("shop.orders")
    orders.upsert(rows([2, 12], amount=7))  # an overwrite and an append in one commit, keys checked
    nothing_opened(under_lock, locks=3)


def test_a_register_opens_no_file_under_the_catalog_lock(live_server, client, token, under_lock):
    """A keyed table of two files and a position delete file: its footers read, its keys checked and LakeUI's delta
    file written, all before the lock."""
    local, folder = external_catalog("local")
    local.create_namespace("shop")
    table = local.create_table("shop.events", SCHEMA)
    table.append(rows(range(5)))
    table = local.load_table("shop.events")
    table.append(rows(range(5, 8)))
    table = local.load_table("shop.events")
    first = sorted(t.file.file_path for t in table.scan().plan_files())[0]
    positions = folder / "positions.parquet"
    pq.write_table(pa.table({"file_path": [first], "pos": pa.array([0], pa.int64())}, schema=pa.schema([
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"})])), positions)  # fmt: skip
    append_files(table, positions, content=DataFileContent.POSITION_DELETES)
    client.catalog_create("lake")
    main = iceberg(live_server, token, "main")
    main.create_namespace("shop")
    under_lock.opened.clear()
    under_lock.locks = 0
    registered = main.register_table("shop.events", local.load_table("shop.events").metadata_location)
    assert registered.scan().to_arrow().num_rows == 7
    nothing_opened(under_lock)


@pytest.mark.django_db(transaction=True)  # the lock is released when the transaction commits
def test_the_instrument_sees_a_file_opened_under_the_lock(user, under_lock, tmp_path):
    """The instrument itself: a file opened while the lock is held is seen, one opened after it is not."""
    from catalog_app.services.refs import catalog_create

    catalog = catalog_create(name="lake", created_by=user)
    with transaction.atomic():
        commits.catalog_lock(catalog=catalog)
        warehouse.arrow_filesystem(f"file://{tmp_path}/inside")
    warehouse.arrow_filesystem(f"file://{tmp_path}/after")
    assert under_lock.opened == [f"file://{tmp_path}/inside"]


# --- LakeUI's own writers, run in this thread (data jobs on the test's Spark, merges through the service) ------


def keyed(*ids, amount=None):
    return [{"id": i, "amount": i if amount is None else amount, "region": "eu"} for i in ids]


def watched(under_lock) -> None:
    under_lock.opened.clear()
    under_lock.locks = 0


def keyed_lake():
    """Catalog `lake`: sales.orders keyed by id, ids 1-3 on main, and a branch dev made from it."""
    from catalog_app.services.refs import branch_create
    from tests.support.catalogs import make_catalog, make_table
    from tests.support.merges import insert

    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, keyed(1, 2, 3))
    branch_create(catalog=catalog, name="dev", source="main")
    return catalog


@pytest.mark.django_db(transaction=True)
def test_a_loads_commit_opens_no_file_under_the_catalog_lock(spark, under_lock, monkeypatch):
    from lakeui.jobs import services
    from tests.support.merges import change, insert

    # The loads run here, where the instrument watches: not sent to the session's workers, which could take one first.
    monkeypatch.setattr(services, "job_send", lambda job_id, kind: None)
    catalog = keyed_lake()
    watched(under_lock)
    insert(catalog, keyed(4, 5))
    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": keyed(2, 6, amount=9)})
    change(catalog, "table_delete", {"where": "id = 1"})
    nothing_opened(under_lock, locks=3)


@pytest.mark.django_db(transaction=True)
def test_a_merges_publish_opens_no_file_under_the_catalog_lock(spark, under_lock):
    from tests.support.merges import change, insert, merge

    catalog = keyed_lake()
    insert(catalog, keyed(4), branch="dev")
    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": keyed(2, amount=9)})
    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": keyed(3, amount=8)},
           branch="dev")  # fmt: skip
    watched(under_lock)
    done = merge(catalog, source="dev", target="main")  # both changed the table: keys compared, rows written
    assert done.commit_id is not None
    nothing_opened(under_lock)


@pytest.mark.django_db(transaction=True)
def test_a_pick_and_a_revert_open_no_file_under_the_catalog_lock(spark, under_lock):
    from merge_app.services.picks import commits_pick
    from tests.support.catalogs import head
    from tests.support.merges import change

    catalog = keyed_lake()
    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": keyed(2, 7, amount=9)},
           branch="dev")  # fmt: skip
    picked = head(catalog, "dev")
    change(catalog, "table_delete", {"where": "id = 3"})
    deleted = head(catalog)
    watched(under_lock)
    commits_pick(catalog=catalog, kind="cherry_pick", branch="main", commits=[picked])
    commits_pick(catalog=catalog, kind="revert", branch="main", commits=[deleted])
    nothing_opened(under_lock, locks=2)


@pytest.mark.django_db(transaction=True)
def test_a_restore_opens_no_file_under_the_catalog_lock(spark, under_lock):
    from merge_app.services.restores import branch_restore
    from tests.support.catalogs import head
    from tests.support.merges import change, insert

    catalog = keyed_lake()
    point = head(catalog)
    insert(catalog, keyed(4, 5))
    change(catalog, "table_delete", {"where": "id = 1"})
    watched(under_lock)
    branch_restore(catalog=catalog, branch="main", point=point, database="sales", table="orders")
    branch_restore(catalog=catalog, branch="main", point=point)
    nothing_opened(under_lock, locks=2)


@pytest.mark.django_db(transaction=True)
def test_a_retention_expiry_opens_no_file_under_the_catalog_lock(spark, under_lock, monkeypatch):
    """Planned again under the lock (as when a ref moved meanwhile): the plan reads the database only."""
    from catalog_app.services import retention
    from catalog_app.services.refs import branch_delete
    from tests.support.merges import insert

    catalog = keyed_lake()
    insert(catalog, keyed(4), branch="dev")
    branch_delete(catalog=catalog, name="dev")
    retention.rules_set(catalog=catalog, rules=[{"pattern": "main", "keep_commits": 1}])
    monkeypatch.setattr(retention, "refs_snapshot", lambda catalog_id: None)  # a ref moved: planned again
    watched(under_lock)
    plan = retention.retention_expire(catalog=catalog)
    assert plan.expiring
    nothing_opened(under_lock)
