"""Writers racing on one branch, with real concurrent transactions (PostgreSQL in CI)."""

import itertools
import threading

import pytest
from django.db import connection

from catalog_app.models import Commit
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import commit_log, ref_resolve
from catalog_app.services.databases import database_create
from lakeui.errors import ApplicationError
from tests.support.catalogs import head, make_catalog, on

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 25


def run_concurrently(*writers):
    """Start the writers together, each in its own thread and database connection; return their outcomes."""
    barrier = threading.Barrier(len(writers))
    outcomes = [None] * len(writers)

    def run(index, writer):
        try:
            barrier.wait()
            outcomes[index] = writer()
        except ApplicationError as exc:
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, writer)) for i, writer in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_two_writers_on_one_head_give_one_commit_and_one_409():
    catalog = make_catalog()
    for round_number in range(ROUNDS):
        start, commits_before = head(catalog), Commit.objects.count()
        outcomes = run_concurrently(
            *(
                lambda name=name, start=start: database_create(target=on(catalog, expected_head=start), name=name)
                for name in (f"a{round_number}", f"b{round_number}")
            )
        )
        won = [outcome for outcome in outcomes if not isinstance(outcome, Exception)]
        lost = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
        assert len(won) == 1, outcomes
        assert [exc.code for exc in lost] == ["branch_moved"]
        assert Commit.objects.count() == commits_before + 1
        assert head(catalog) == won[0].commit_id
        assert Commit.objects.get(id=head(catalog)).parent_id == start


def test_unpinned_concurrent_writers_all_commit_in_one_chain():
    catalog = make_catalog()
    names = [f"db{i}" for i in range(8)]
    outcomes = run_concurrently(*(lambda name=name: database_create(target=on(catalog), name=name) for name in names))
    assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    chain = ref_resolve(catalog=catalog, ref="main").chain
    assert sorted(version.name for version in objects_at(chain, kind="database")) == names
    log = list(commit_log(chain))
    assert len(log) == 9
    assert all(newer.parent_id == older.id for newer, older in itertools.pairwise(log))
