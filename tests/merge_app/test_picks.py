"""REVERT COMMIT and CHERRY-PICK COMMIT (docs/merge-semantics.md#revert-and-cherry-pick): merges with a given base,
on real Spark data. Each test checks the rows (as a multiset: a row held twice shows) on every branch involved
after each step, and what a later MERGE BRANCH makes of what a revert or a pick did."""

import re

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError, ConflictError
from merge_app.models import Merge
from merge_app.services.picks import commits_pick, pick_commits
from merge_app.services.restores import branch_restore
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read
from tests.support.merges import change, insert, merge
from tests.support.sql import sql_followed

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, amount=None):
    return [{"id": i, "amount": i * 10 if amount is None else amount, "region": "eu"} for i in ids]


def table(spark, catalog, ref):
    return sorted((r["id"], r["amount"]) for r in read(spark, catalog, ref).collect())


def expect(*ids, **amounts):
    changed = {int(name[1:]): amount for name, amount in amounts.items()}
    return sorted((i, changed.get(i, i * 10)) for i in ids)


def start(*, primary_key=None):
    catalog = make_catalog()
    make_table(catalog, **({"primary_key": primary_key} if primary_key else {}))
    insert(catalog, rows(1, 2, 3))
    branch_create(catalog=catalog, name="dev", source="main")
    return catalog


def revert(catalog, branch, commit, **kwargs) -> list[Merge]:
    return commits_pick(catalog=catalog, kind="revert", branch=branch, commits=[commit], **kwargs)


def pick(catalog, branch, *commits, **kwargs) -> list[Merge]:
    return commits_pick(catalog=catalog, kind="cherry_pick", branch=branch, commits=list(commits), **kwargs)


def upsert(catalog, branch, *ids, amount):
    params = {"strategy": "upsert", "key_columns": ["id"], "rows": rows(*ids, amount=amount)}
    change(catalog, "table_load", params, branch=branch)


def test_a_reverted_load_takes_its_rows_out_and_keeps_later_ones(spark):
    catalog = start()
    insert(catalog, rows(4, 5))
    load = head(catalog)
    insert(catalog, rows(6))
    (done,) = revert(catalog, "main", load)
    assert table(spark, catalog, "main") == expect(1, 2, 3, 6)
    assert done.kind == "revert" and done.commit.merge_parent_id is None
    assert done.commit.message.startswith(f"Revert {load[:12]}")
    assert done.log["objects"][0]["operations"] == ["delete"]
    # dev never had the load; merging main into it brings the later append only, once
    merge(catalog, source="main", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 6)
    # reverting the revert brings the rows back, by reference
    revert(catalog, "main", done.commit_id)
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6)


def test_a_reverted_delete_brings_its_rows_back_and_a_later_change_of_them_conflicts(spark):
    catalog = start()
    change(catalog, "table_delete", {"where": "id = 2"})
    deleted = head(catalog)
    assert table(spark, catalog, "main") == expect(1, 3)
    revert(catalog, "main", deleted)
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    # a load whose rows a later commit deleted cannot be reverted without losing that delete: refused, unchanged
    insert(catalog, rows(7, 8))
    load = head(catalog)
    change(catalog, "table_delete", {"where": "id = 7"})
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        revert(catalog, "main", load)
    assert refused.value.code == "merge_conflict"
    assert head(catalog) == before and table(spark, catalog, "main") == expect(1, 2, 3, 8)
    logged = Merge.objects.filter(kind="revert", status="conflict").get()
    cells = {pair["cell"] for obj in logged.report["objects"] for pair in obj["pairs"]}
    assert "V*" in cells


def test_a_reverted_merge_undoes_what_it_brought_and_a_later_merge_does_not_bring_it_back(spark):
    catalog = start()
    insert(catalog, rows(4), branch="dev")
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    merged = merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(2, 3, 4)
    revert(catalog, "main", merged.commit_id)
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    # dev unchanged since: nothing to merge again; dev changes once more: only that comes
    assert merge(catalog, source="dev", target="main").status == "up_to_date"
    insert(catalog, rows(9), branch="dev")
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 9)
    assert table(spark, catalog, "dev") == expect(2, 3, 4, 9)


def test_a_reverted_merge_of_an_overwrite_brings_back_every_row_it_replaced_on_the_target(spark):
    # The merge replayed the source's overwrite on main, replacing main's own rows too; its operation's details name
    # only the source's files it replaced. Found by the model (LAKEUI_MODEL_SEED=60): the revert took the details
    # and brought back the source's rows only, losing main's.
    catalog = start()
    insert(catalog, rows(4, 5))
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(7)}, branch="dev")
    merged = merge(catalog, source="dev", target="main", resolution={"default": "source_wins"})
    assert merged.status == "merged"
    assert table(spark, catalog, "main") == expect(7)
    revert(catalog, "main", merged.commit_id)
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5)
    assert table(spark, catalog, "dev") == expect(7)


def test_a_reverted_update_by_key_and_a_key_changed_again_later(spark):
    catalog = start(primary_key=["id"])
    upsert(catalog, "main", 2, 4, amount=99)
    update = head(catalog)
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, _2=99, _4=99)
    revert(catalog, "main", update)
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    # a key the reverted commit set and a later commit changed again conflicts; the others revert
    upsert(catalog, "main", 1, 3, amount=50)
    second = head(catalog)
    upsert(catalog, "main", 3, amount=60)
    with pytest.raises(ConflictError):
        revert(catalog, "main", second)
    (done,) = revert(catalog, "main", second, resolution={"default": "target_wins"})
    assert table(spark, catalog, "main") == expect(1, 2, 3, _3=60)
    assert done.commit_id == head(catalog)


@pytest.mark.parametrize("primary_key", [None, ["id"]])
def test_a_cherry_pick_applies_one_commit_and_a_later_merge_does_not_apply_it_twice(spark, primary_key):
    catalog = start(primary_key=primary_key)
    insert(catalog, rows(4), branch="dev")
    insert(catalog, rows(5), branch="dev")
    fix = head(catalog, "dev")
    insert(catalog, rows(6), branch="dev")
    (done,) = pick(catalog, "main", fix)
    assert done.kind == "cherry_pick" and done.commit.merge_parent_id is None
    assert table(spark, catalog, "main") == expect(1, 2, 3, 5)
    again = pick(catalog, "main", fix)[0]  # picked already: no row again
    assert table(spark, catalog, "main") == expect(1, 2, 3, 5)
    # without a key the operation is known as picked; a keyed table compares by key and finds every key the same,
    # but still records a commit (noted in docs/merge-semantics.md)
    assert again.status == ("up_to_date" if primary_key is None else "merged")
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6)
    merge(catalog, source="main", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 5, 6)


def test_a_picked_commit_travels_with_its_branch_and_is_not_doubled_where_the_original_arrives(spark):
    catalog = start()
    branch_create(catalog=catalog, name="release", source="main")
    insert(catalog, rows(7), branch="dev")
    fix = head(catalog, "dev")
    pick(catalog, "release", fix)
    branch_create(catalog=catalog, name="hotfix", source="release")
    merge(catalog, source="release", target="main")  # main gets the fix through the pick
    assert table(spark, catalog, "main") == expect(1, 2, 3, 7)
    merge(catalog, source="dev", target="main")  # and the original: not a second time
    assert table(spark, catalog, "main") == expect(1, 2, 3, 7)
    merge(catalog, source="main", target="hotfix")
    assert table(spark, catalog, "hotfix") == expect(1, 2, 3, 7)


def test_a_range_applies_each_commit_or_none(spark):
    catalog = start()
    base = head(catalog, "dev")
    insert(catalog, rows(4), branch="dev")
    change(catalog, "table_update", {"set": {"amount": "0"}, "where": "id = 4"}, branch="dev")
    end = head(catalog, "dev")
    commits = pick_commits(catalog=catalog, kind="cherry_pick", head=None, commit=None, start=base, end=end)
    assert len(commits) == 2
    picked = pick(catalog, "main", *commits)
    assert [m.status for m in picked] == ["merged", "merged"]
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, _4=0)
    # a range whose second commit conflicts on the target commits nothing
    branch_create(catalog=catalog, name="other", source="dev")
    change(catalog, "table_delete", {"where": "id = 4"}, branch="other")
    later_base = head(catalog, "dev")
    insert(catalog, rows(5), branch="dev")
    change(catalog, "table_update", {"set": {"amount": "1"}, "where": "id = 4"}, branch="dev")
    commits = pick_commits(
        catalog=catalog, kind="cherry_pick", head=None, commit=None, start=later_base, end=head(catalog, "dev")
    )
    before = head(catalog, "other")
    with pytest.raises(ConflictError):
        pick(catalog, "other", *commits)
    assert head(catalog, "other") == before and table(spark, catalog, "other") == expect(1, 2, 3)


@pytest.mark.usefixtures("celery_worker")
def test_revert_and_cherry_pick_through_the_api_with_their_audit_logs(spark, user_client):
    catalog = start()
    insert(catalog, rows(4), branch="dev")
    fix = head(catalog, "dev")
    url = f"/api/v1/catalogs/{catalog.name}"
    response = user_client.post(f"{url}/cherry-picks", {"branch": "main", "commit": fix}, format="json")
    assert response.status_code == 202, response.json()
    job = wait_for_job(response.json()["id"], timeout=240)
    assert job.status == "succeeded", job.error_message
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4)
    picked = job.result["commits"][0]
    response = user_client.post(f"{url}/reverts", {"branch": "main", "commit": picked}, format="json")
    job = wait_for_job(response.json()["id"], timeout=240)
    assert job.status == "succeeded", job.error_message
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    reverts = user_client.get(f"{url}/reverts").json()["results"]
    assert [(r["kind"], r["source"], r["status"]) for r in reverts] == [("revert", picked, "merged")]
    assert [r["kind"] for r in user_client.get(f"{url}/cherry-picks").json()["results"]] == ["cherry_pick"]
    assert user_client.get(f"{url}/merges").json()["results"] == []
    # SQL: the revert reverted (and a range that does not parse)
    statement = f"REVERT COMMIT '{reverts[0]['commit']}' ON BRANCH main"
    status, answer = sql_followed(user_client, catalog, statement)
    assert status == 200, answer
    assert answer["kind"] == "revert" and answer["status"] == "merged"
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4)
    bad = user_client.post(f"{url}/sql", {"statement": f"CHERRY-PICK COMMIT '{fix}'.. ON BRANCH main"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "syntax_error"
    # bad input: 4xx with a code, nothing queued
    for path, body, code in [
        ("reverts", {"branch": "main", "commit": fix}, "invalid_input"),  # not in main's history
        ("reverts", {"branch": "main"}, "invalid_input"),
        ("cherry-picks", {"branch": "main", "commit": "ghost"}, "ref_not_found"),
        ("cherry-picks", {"branch": "v-none", "commit": fix}, "ref_not_found"),
    ]:
        refused = user_client.post(f"{url}/{path}", body, format="json")
        assert refused.status_code in (400, 404) and refused.json()["code"] == code, (path, body, refused.json())


def test_a_commit_that_changed_definitions_is_not_reverted(spark):
    catalog = make_catalog()
    make_table(catalog)
    created = head(catalog)
    insert(catalog, rows(1))
    with pytest.raises(ApplicationError) as refused:
        revert(catalog, "main", created)
    assert refused.value.code == "revert_unsupported"
    assert table(spark, catalog, "main") == expect(1)


def test_the_commit_page_and_the_log_offer_revert_and_cherry_pick(spark, user):
    from django.test import Client

    from lakeui.jobs.services import job_execute

    catalog = start()
    insert(catalog, rows(4), branch="dev")
    fix = head(catalog, "dev")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    page = browser.get(f"/catalogs/{catalog.name}/commits/{fix}").content.decode()
    assert 'value="cherry_pick"' in page and 'value="revert"' in page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    url = f"/catalogs/{catalog.name}/commits/{fix}/pick"
    submitted = browser.post(url, {"kind": "cherry_pick", "branch": "main", "csrfmiddlewaretoken": token})
    assert submitted.status_code == 302 and "/jobs/" in submitted["Location"]
    job_id = submitted["Location"].rstrip("/").split("/")[-1]
    job_execute(job_id=job_id, worker="test")
    assert wait_for_job(job_id, timeout=120).status == "succeeded"
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4)
    log = browser.get(f"/catalogs/{catalog.name}/log?ref=main").content.decode()
    assert log.count(">Revert</button>") >= 2  # every commit with a parent on main
    # a commit of dev is not in main's history: the refusal is a message on the log, nothing queued
    post = {"kind": "revert", "branch": "main", "back": "log", "csrfmiddlewaretoken": token}
    refused = browser.post(url, post, follow=True)
    assert "not in the branch&#x27;s history" in refused.content.decode()
    assert refused.redirect_chain[-1][0].endswith("/log?ref=main")
    assert browser.post(url, {"kind": "revert", "branch": "main"}).status_code == 403  # no CSRF token


def test_a_pick_of_an_update_of_a_key_the_target_deleted_since_conflicts(spark):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], properties={"write.mode": "merge-on-read"})
    upsert(catalog, "main", 5, amount=1)
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "2"}, "where": "id = 5"}, branch="dev")
    update = head(catalog, "dev")
    merge(catalog, source="dev", target="main")
    change(catalog, "table_delete", {"where": "id = 5"})
    branch_create(catalog=catalog, name="b5", source="main")
    with pytest.raises(ConflictError):
        pick(catalog, "b5", update)
    assert table(spark, catalog, "b5") == []


def test_a_commit_that_came_by_a_merge_is_reverted_on_the_branch_it_came_to(spark):
    catalog = start()
    insert(catalog, rows(4), branch="dev")
    load = head(catalog, "dev")
    merge(catalog, source="dev", target="main")
    revert(catalog, "main", load)
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4)


def test_a_revert_replaces_a_key_where_a_restore_brought_its_older_row_back(spark):
    """Found by the keyed model (seed 41, a revert of a pick of a revert): after a restore, a key's row is live again
    in a segment of the reverted commit's that held it deleted there. The revert changes the key back; it must
    replace that row, not write the key beside it (it was refused as a doubled key)."""
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], properties={"write.mode": "merge-on-read"})
    upsert(catalog, "main", 6, 7, amount=2)  # one segment with both keys
    point = head(catalog)
    change(catalog, "table_update", {"set": {"amount": "3"}, "where": "id = 6"})  # deleted there, a new row elsewhere
    change(catalog, "table_update", {"set": {"amount": "2"}, "where": "id = 6"})
    back = head(catalog)
    branch_restore(catalog=catalog, branch="main", point=point, database="sales", table="orders")
    assert table(spark, catalog, "main") == expect(6, 7, _6=2, _7=2)  # as at `back`, from the first segment again
    (done,) = revert(catalog, "main", back)
    assert done.status == "merged"
    assert table(spark, catalog, "main") == expect(6, 7, _6=3, _7=2)


def test_a_revert_undoes_a_picked_copy_where_the_reverting_branch_is_merged_and_the_branches_converge(spark):
    """The six-step history of issue 37 (docs/merge-semantics.md#a-revert-after-a-pick): rows X appended on b1 and
    cherry-picked onto main, reverted on b1, b1 merged into main, main merged into b1. The revert undoes
    its commit wherever the reverting branch is merged, the picked copy included; merges converge; the audit log says
    what the merge did to the files. It said the delete was replayed while main kept X's segment, for good."""
    from catalog_app.selectors.table_files import commit_file_changes
    from tests.support.merges import table_at

    catalog = start()
    branch_create(catalog=catalog, name="b1", source="main")  # 1
    insert(catalog, rows(4, 5), branch="b1")  # 2: X
    load = head(catalog, "b1")
    pick(catalog, "main", load)  # 3
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5)
    (reverted,) = revert(catalog, "b1", load)  # 4
    assert table(spark, catalog, "b1") == expect(1, 2, 3)
    (undo,) = [op for op in reverted.commit.operations.all() if op.op == "delete"]
    merged = merge(catalog, source="b1", target="main")  # 5
    assert merged.status == "merged"
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    # the audit log says the delete was replayed, and the merge commit took out the segments it names
    (logged,) = merged.log["objects"]
    assert logged["operations"] == ["delete"]
    files = commit_file_changes(merged.commit_id)[table_at(catalog, "main").object_id]
    assert sorted(files["segments_removed"]) == sorted(undo.details["segments_removed"])
    assert files["segments_added"] == [] and files["deltas_added"] == []
    logged_out = [f["id"] for f in merged.log["files_removed"] if f["kind"] == "segment"]
    assert sorted(logged_out) == sorted(files["segments_removed"])
    assert merge(catalog, source="main", target="b1").status in ("up_to_date", "merged")  # 6
    assert table(spark, catalog, "b1") == table(spark, catalog, "main") == expect(1, 2, 3)


@pytest.mark.parametrize("primary_key", [None, ["id"]])
def test_a_pick_runs_no_spark_while_the_catalog_lock_is_held(spark, monkeypatch, primary_key):
    """Plan and write files first, then lock, check the head, commit (docs/architecture.md): the key comparison and the
    writer's files (Spark) run outside any transaction, so no row lock of the catalog is held meanwhile, and the
    branch's lock is taken after the last of them returned."""
    from django.db import transaction

    from merge_app.services import picks
    from merge_app.services.merge_writer import MergeWriter

    events = []

    def spy(name, work):
        def run(*args, **kwargs):
            assert not transaction.get_connection().in_atomic_block, f"{name} ran inside a transaction"
            answer = work(*args, **kwargs)
            events.append(name)
            return answer

        return run

    def locked(*args, **kwargs):
        events.append("lock")
        return commit_begin(*args, **kwargs)

    commit_begin = picks.commit_begin
    monkeypatch.setattr(picks, "keys_compared", spy("compared", picks.keys_compared))
    monkeypatch.setattr(MergeWriter, "write_files", spy("written", MergeWriter.write_files))
    monkeypatch.setattr(picks, "commit_begin", locked)
    catalog = start(primary_key=primary_key)
    insert(catalog, rows(4), branch="dev")
    first = head(catalog, "dev")
    upsert(catalog, "dev", 2, amount=7)
    if primary_key:  # a keyed table changed on both sides: compared by key, on Spark
        upsert(catalog, "main", 3, amount=9)
    picked = pick(catalog, "main", first, head(catalog, "dev"))
    assert [m.status for m in picked] == ["merged", "merged"]
    assert events == ["compared", "written", "compared", "written", "lock"]
    mains = expect(1, 2, 3, 4, _2=7, _3=9) if primary_key else expect(1, 2, 3, 4, _2=7)
    assert table(spark, catalog, "main") == mains
    assert head(catalog) == picked[-1].commit_id and picked[-1].commit.parent_id == picked[0].commit_id
    assert picked[0].commit.parent_id == picked[0].target_head and picked[-1].target_head == picked[0].commit_id


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("kind", ["table_delete", "table_update"])
def test_a_revert_on_a_branch_that_declined_the_rows_brings_back_only_those_the_commit_removed(spark, mode, kind):
    """A three-way merge with the commit as its base (docs/merge-semantics.md#revert-and-cherry-pick): the rows the commit removed come back, also on a
    branch that kept its own table when it merged them (`target_wins`), and only those: not the other rows of the
    segment they were in, which that branch never had (seed 20 of the unkeyed model lost the row; copy-on-write
    brought the whole segment)."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    insert(catalog, rows(1, 2, 3))
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(4, 5))
    params = {"where": "id = 4"} | ({"set": {"amount": "amount + 1"}} if kind == "table_update" else {})
    change(catalog, kind, params)
    removed = head(catalog)
    insert(catalog, rows(6), branch="dev")
    with pytest.raises(ConflictError):  # a delete or update of main against dev's insert
        merge(catalog, source="main", target="dev")
    merge(catalog, source="main", target="dev", resolution={"default": "target_wins"})
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 6)
    (done,) = revert(catalog, "dev", removed)
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 6)
    # main, unchanged since dev merged it, takes dev's version: row 4 as it was, not row 5, which dev's merge
    # declined (docs/merge-semantics.md#merges-converge)
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == table(spark, catalog, "dev") == expect(1, 2, 3, 4, 6)
    # and reverting the revert takes row 4 out again
    revert(catalog, "dev", done.commit_id)
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 6)
