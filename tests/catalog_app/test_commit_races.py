"""Writers racing on one branch, with real concurrent transactions (PostgreSQL in CI)."""

import itertools
import threading

import pytest
from django.db import OperationalError, connection, transaction

from catalog_app.models import Branch, Commit
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import commit_log, ref_resolve
from catalog_app.services.commits import catalog_lock
from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create, tag_create
from lakeui.errors import ApplicationError, ConflictError
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


def holding(lock, release: threading.Event, held: threading.Event) -> threading.Thread:
    """A thread that takes `lock()` in a transaction of its own and holds it until `release` is set."""

    def run():
        try:
            with transaction.atomic():
                lock()
                held.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(30)
    return thread


def refused_waiting(action) -> str:
    """`action()` in a transaction that may wait at most 1 s for a lock: the error code of a wait that timed out."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '1s'")
            action()
    except OperationalError as exc:
        return getattr(exc.__cause__, "sqlstate", "")
    return "no wait"


def test_a_branch_or_tag_create_does_not_wait_for_a_commit_holding_the_catalog_lock():
    catalog = make_catalog()
    release, held = threading.Event(), threading.Event()
    thread = holding(lambda: catalog_lock(catalog=catalog), release, held)
    try:
        assert refused_waiting(lambda: branch_create(catalog=catalog, name="dev", source="main")) == "no wait"
        assert refused_waiting(lambda: tag_create(catalog=catalog, name="v1", ref="main")) == "no wait"
    finally:
        release.set()
        thread.join(30)
    assert Branch.objects.filter(catalog=catalog, name="dev").exists()


def test_retention_keeps_branch_and_tag_creates_and_commits_out_and_two_creates_of_one_name_wait():
    catalog = make_catalog()
    release, held = threading.Event(), threading.Event()
    thread = holding(lambda: catalog_lock(catalog=catalog, exclusive=True), release, held)
    try:
        lock_timeout = "55P03"
        assert refused_waiting(lambda: branch_create(catalog=catalog, name="dev", source="main")) == lock_timeout
        assert refused_waiting(lambda: tag_create(catalog=catalog, name="v1", ref="main")) == lock_timeout
        assert refused_waiting(lambda: database_create(target=on(catalog), name="sales")) == lock_timeout
    finally:
        release.set()
        thread.join(30)
    release, held = threading.Event(), threading.Event()
    thread = holding(lambda: branch_create(catalog=catalog, name="dev", source="main"), release, held)
    try:
        lock_timeout = "55P03"
        assert refused_waiting(lambda: tag_create(catalog=catalog, name="dev", ref="main")) == lock_timeout
        assert refused_waiting(lambda: branch_create(catalog=catalog, name="other", source="main")) == "no wait"
    finally:
        release.set()
        thread.join(30)
    with pytest.raises(ConflictError) as refused:
        tag_create(catalog=catalog, name="dev", ref="main")
    assert refused.value.code == "ref_exists"


def test_a_branch_and_a_tag_of_one_name_made_at_once_give_one_ref_and_one_409():
    """A create checks the name and inserts the ref in one statement (`services.refs._ref_insert`), after the lock
    that holds the name: a branch and a tag of one name, made together, never both exist."""
    catalog = make_catalog()
    for round_ in range(ROUNDS):
        name = f"r{round_}"
        outcomes = run_concurrently(
            lambda name=name: branch_create(catalog=catalog, name=name, source="main"),
            lambda name=name: tag_create(catalog=catalog, name=name, ref="main"),
        )
        assert sorted(type(o).__name__ for o in outcomes) in (["Branch", "ConflictError"], ["ConflictError", "Tag"])
        assert [o.code for o in outcomes if isinstance(o, ConflictError)] == ["ref_exists"]


def test_a_branch_create_at_a_branch_or_a_tag_is_one_statement_after_the_names_lock(django_assert_num_queries):
    """At a branch head or a tag (as nearly every create is), the name's check, the source and the insert are one
    statement; a commit id or a time is resolved apart. The webhooks are read for the event."""
    catalog = make_catalog()
    tag_create(catalog=catalog, name="v1", ref="main")
    for name, source in (("dev", "main"), ("from_tag", "v1")):
        with django_assert_num_queries(5):  # BEGIN, the name's lock, the create, the event's webhooks, COMMIT
            made = branch_create(catalog=catalog, name=name, source=source)
        assert made.head_id == ref_resolve(catalog=catalog, ref=source).commit.id and made.created_at is not None
    commit = head(catalog, "main")
    assert branch_create(catalog=catalog, name="from_commit", source=commit).head_id == commit
    with pytest.raises(ConflictError) as refused:
        branch_create(catalog=catalog, name="v1", source="main")
    assert refused.value.code == "ref_exists"
