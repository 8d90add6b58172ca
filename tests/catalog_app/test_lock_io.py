"""No file work under the catalog lock: a writer prepares its files (reads manifests and footers, checks keys,
writes delete files and metadata) before it takes the lock, and under the lock only checks that the state it read
is still the one and records rows. The lock (catalog_app/services/commits.py `catalog_lock`, held until the
transaction that took it ends) and the warehouse's file layer (`arrow_filesystem`, through which LakeUI's engine
opens every warehouse file, and pyiceberg's FileIO for manifests and metadata) are instrumented per thread here;
the live server answers in threads of this process."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import sys
import threading

import pytest
from django.db import transaction
from pyiceberg.io.pyarrow import PyArrowFileIO

from catalog_app.engine import warehouse
from catalog_app.services import commits
from tests.catalog_app.test_iceberg_rest import client, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import keyed_orders, rows


@pytest.fixture
def under_lock(monkeypatch) -> list[str]:
    """The warehouse files opened by a thread while it holds the catalog lock."""
    held: set[int] = set()
    found: list[str] = []
    lock = commits.catalog_lock

    def locked(*, catalog):
        taken = lock(catalog=catalog)
        thread = threading.get_ident()
        held.add(thread)
        transaction.on_commit(lambda: held.discard(thread))  # released with the transaction
        return taken

    def noted(what: str) -> None:
        thread = threading.get_ident()
        if thread in held and not transaction.get_connection().in_atomic_block:
            held.discard(thread)  # its transaction rolled back: the lock went with it
        if thread in held:
            found.append(what)

    opened = warehouse.arrow_filesystem

    def filesystem(uri):
        noted(uri)
        return opened(uri)

    monkeypatch.setattr(commits, "catalog_lock", locked)
    for name, module in list(sys.modules.items()):  # every module that imported it holds its own name for it
        if name.startswith(("catalog_app.", "merge_app.")) and getattr(module, "arrow_filesystem", None) is opened:
            monkeypatch.setattr(module, "arrow_filesystem", filesystem)
    for method in ("new_input", "new_output"):
        original = getattr(PyArrowFileIO, method)

        def wrapped(self, location, _original=original):
            noted(location)
            return _original(self, location)

        monkeypatch.setattr(PyArrowFileIO, method, wrapped)
    return found


def test_an_iceberg_commit_opens_no_file_under_the_catalog_lock(live_server, client, token, under_lock):
    main, _ = keyed_orders(live_server, client, token)
    under_lock.clear()
    main.load_table("shop.orders").append(rows([10, 11]))
    assert under_lock == []


@pytest.mark.django_db(transaction=True)  # the lock is released when the transaction commits
def test_the_instrument_sees_a_file_opened_under_the_lock(user, under_lock, tmp_path):
    """The instrument itself: a file opened while the lock is held is seen, one opened after it is not."""
    from catalog_app.services.refs import catalog_create

    catalog = catalog_create(name="lake", created_by=user)
    with transaction.atomic():
        commits.catalog_lock(catalog=catalog)
        warehouse.arrow_filesystem(f"file://{tmp_path}/inside")
    warehouse.arrow_filesystem(f"file://{tmp_path}/after")
    assert under_lock == [f"file://{tmp_path}/inside"]
