"""Retention (docs/retention.md): the issue's "Done when", end to end through the API, the workers and GC."""

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from catalog_app.engine.iceberg_metadata import snapshot_id
from catalog_app.models import Commit, DataFile, ExpiredCommit, Line
from catalog_app.selectors.refs import commit_chain
from catalog_app.selectors.table_files import table_files
from catalog_app.services.refs import branch_create, tag_create
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import load, run, table_version
from tests.support.reads import read_followed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

ROWS = [{"id": i, "amount": i * 10, "region": "eu"} for i in range(1, 6)]
RULES = [{"pattern": "scratch/*", "keep_days": 3}, {"pattern": "main"}]


def _rows(client, catalog, ref, table="orders", at=None):
    query = {"page_size": 1000, **({"at": at} if at else {})}
    return read_followed(
        client, f"/api/v1/catalogs/{catalog.name}/refs/{ref}/databases/sales/tables/{table}/rows", query
    )


def _sorted_rows(response):
    assert response.status_code == 200, response.json()
    return sorted(map(tuple, response.json()["rows"]))


def _live_files(catalog, commit):
    """The ids of the files live at a commit, in every table (the oracle: read by the selectors, not the plan)."""
    chain = commit_chain(commit)
    found = set()
    for table in ("orders", "other"):
        try:
            _, version = table_version(catalog, commit.id, table=table)
        except Exception:  # the table does not exist at this commit
            continue
        if version is None or version.dropped:
            continue
        files = table_files(chain, table_id=version.object_id)
        found |= {f.id for f in files.segments} | {d.id for ds in files.deltas.values() for d in ds}
    return found


def test_retention_expires_old_scratch_history_and_gc_reclaims_exactly_its_bytes(user_client):
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": "copy-on-write"})
    make_table(catalog, table="other")
    load(catalog, ROWS)
    load(catalog, ROWS[:2], table="other")
    branch_create(catalog=catalog, name="scratch/x", source="main")
    for i in range(20):  # a table rewritten copy-on-write 20 times on each branch
        for branch in ("main", "scratch/x"):
            run(catalog, "table_update", {"set": {"amount": f"amount + {i + 1}"}, "where": "TRUE"}, branch=branch)
    # Clocks moved: commit times spread over the last 30 days, rising with the catalog's sequence as they do.
    commits = list(Commit.objects.filter(catalog=catalog).order_by("seq"))
    start, step = timezone.now() - timedelta(days=30), timedelta(days=29) / len(commits)
    for index, commit in enumerate(commits):
        Commit.objects.filter(id=commit.id).update(created_at=start + step * index)
    scratch_line = Commit.objects.get(id=head(catalog, "scratch/x")).line_id
    scratch = list(Commit.objects.filter(line_id=scratch_line).order_by("seq"))
    assert len(scratch) == 20
    tagged, forked = scratch[4], scratch[7]
    tag_create(catalog=catalog, name="scratch/pinned", ref=tagged.id)
    branch_create(catalog=catalog, name="scratch/feature", source=forked.id)
    load(catalog, [{"id": 99, "amount": 1, "region": "us"}], table="other", branch="scratch/feature")

    now = timezone.now()
    cutoff = now - timedelta(days=3)
    old = [c for c in scratch if c.created_at <= cutoff]
    boundary = old[-1]  # the head at the cutoff: a read 3 days back resolves to it
    expected = {c.id for c in old} - {boundary.id, tagged.id, forked.id}
    assert len(expected) >= 10
    every = list(Commit.objects.filter(catalog=catalog))
    kept = [c for c in every if c.id not in expected]
    live_kept = set().union(*(_live_files(catalog, c) for c in kept))
    reclaimable = DataFile.objects.filter(catalog=catalog).exclude(id__in=live_kept)
    expected_bytes = sum(f.size_bytes for f in reclaimable)
    assert expected_bytes > 0
    before = {c.id: _sorted_rows(_rows(user_client, catalog, c.id)) for c in every if c.seq > 3}

    iceberg = f"/iceberg/{catalog.name}/{scratch[-1].id}/v1/namespaces/sales/tables/orders"
    served = user_client.get(iceberg)
    assert served.status_code == 200, served.content
    assert {snapshot_id(c) for c in expected} <= {s["snapshot-id"] for s in served.json()["metadata"]["snapshots"]}

    # The preview, of proposed rules: exactly the scratch commits older than 3 days that nothing pins.
    url = f"/api/v1/catalogs/{catalog.name}/retention"
    preview = user_client.post(f"{url}/preview", {"rules": RULES}, format="json")
    assert preview.status_code == 200, preview.json()
    plan = preview.json()
    assert plan["commits_expiring"] == len(expected)
    assert (plan["files_reclaimed"], plan["bytes_reclaimed"]) == (reclaimable.count(), expected_bytes)
    refs = {r["ref"]: r for r in plan["refs"]}
    assert set(refs["scratch/x"]["expiring"]) == expected
    assert refs["scratch/x"]["bytes_reclaimed"] == expected_bytes
    assert refs["main"]["expiring"] == [] and refs["main"]["bytes_reclaimed"] == 0
    assert refs["scratch/x"]["oldest_kept"]["commit"] == scratch[scratch.index(old[-2]) + 1].id
    # The tag and the branch forked in the old region keep their own point (each their ref's rule keeps).
    assert refs["scratch/x"]["kept_for_other_refs"] >= 2
    assert refs["scratch/pinned"]["oldest_kept"]["commit"] == tagged.id
    assert not ExpiredCommit.objects.exists()  # a preview changes nothing

    # Saved rules, then expiry as a job.
    assert user_client.put(url, {"rules": RULES}, format="json").json()["rules"][0]["keep_days"] == 3
    bad = user_client.put(url, {"rules": [{"pattern": "x", "keep_commits": 0}]}, format="json")
    assert bad.status_code == 400 and user_client.get(url).json()["rules"][0]["pattern"] == "scratch/*"
    expiry = user_client.post(f"{url}/expire")
    assert expiry.status_code == 202
    job = wait_for_job(expiry.json()["id"], timeout=120)
    assert job.status == "succeeded", job.error_message
    assert set(ExpiredCommit.objects.values_list("commit_id", flat=True)) == expected
    assert job.result["bytes_reclaimed"] == expected_bytes

    # Reads at an expired point: 410 naming the oldest point kept; every kept point reads as before.
    for commit_id in expected:
        gone = _rows(user_client, catalog, commit_id)
        assert (gone.status_code, gone.json()["code"]) == (410, "history_expired")
        assert gone.json()["details"]["oldest_kept"]["commit"]
    expired_time = next(c for c in scratch if c.id in expected).created_at.isoformat()
    at_time = _rows(user_client, catalog, "scratch/x", at=expired_time)
    assert (at_time.status_code, at_time.json()["code"]) == (410, "history_expired")
    assert at_time.json()["details"]["oldest_kept"]["commit"] == refs["scratch/x"]["oldest_kept"]["commit"]
    for commit_id, rows in before.items():
        if commit_id not in expected:
            assert _sorted_rows(_rows(user_client, catalog, commit_id)) == rows, commit_id
    assert _sorted_rows(_rows(user_client, catalog, "scratch/pinned")) == before[tagged.id]

    # The Iceberg snapshots served follow: no expired commit is a snapshot any more, every kept one still is.
    served = user_client.get(iceberg).json()["metadata"]
    snapshots = {s["snapshot-id"] for s in served["snapshots"]}
    assert not snapshots & {snapshot_id(c) for c in expected}
    assert {snapshot_id(boundary.id), snapshot_id(tagged.id), snapshot_id(scratch[-1].id)} <= snapshots
    assert all(s.get("parent-snapshot-id", 0) not in {snapshot_id(c) for c in expected} for s in served["snapshots"])

    # GC reclaims exactly the bytes the preview said.
    warehouse = Path(settings.LAKEUI_WAREHOUSE)
    folder = warehouse / str(catalog.id)
    aged = time.time() - 2 * 3600
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (aged, aged))
    expected_paths = {f.path for f in reclaimable}
    assert sum((warehouse / p).stat().st_size for p in expected_paths) == expected_bytes
    gc = wait_for_job(job_create(kind="catalog_gc", params={"catalog_id": str(catalog.id), "grace_seconds": 3600}).id)
    assert gc.status == "succeeded", gc.error_message
    removed = {p for p in gc.result["removed"] if not Path(p).name.startswith(".")}
    assert removed == expected_paths
    companions = sum(1 for p in gc.result["removed"] if Path(p).name.startswith("."))
    assert gc.result["bytes_removed"] >= expected_bytes and (companions or gc.result["bytes_removed"] == expected_bytes)
    for commit_id, rows in before.items():
        if commit_id not in expected:
            assert _sorted_rows(_rows(user_client, catalog, commit_id)) == rows, commit_id

    # A branch forked in the expired region merges right: its base was kept.
    merged = user_client.post(f"/api/v1/catalogs/{catalog.name}/merges",
                              {"source": "scratch/feature", "target": "scratch/x"}, format="json")  # fmt: skip
    assert merged.status_code == 202, merged.json()
    merge = wait_for_job(merged.json()["id"], timeout=120)
    assert merge.status == "succeeded", merge.error_message
    assert _sorted_rows(_rows(user_client, catalog, "scratch/x")) == before[scratch[-1].id]
    assert _sorted_rows(_rows(user_client, catalog, "scratch/x", table="other")) == sorted(
        [(r["id"], r["amount"], r["region"]) for r in ROWS[:2]] + [(99, 1, "us")]
    )
    assert Line.objects.filter(catalog=catalog).exists()


def test_retention_endpoints_are_for_admins_and_check_rules(user_client, api_client):
    from django.contrib.auth import get_user_model

    from catalog_app.services.access import catalog_role_grant

    catalog = make_catalog()
    url = f"/api/v1/catalogs/{catalog.name}/retention"
    assert user_client.get(url).json() == {"rules": []}
    for body in ({"rules": [{"pattern": ""}]}, {"rules": [{"pattern": "a", "keep_days": -1}]}, {"rules": "x"}):
        response = user_client.put(url, body, format="json")
        assert response.status_code == 400 and response.json()["code"], body
    viewer = get_user_model().objects.create_user("bob", password="pw")
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=catalog.created_by)
    api_client.force_authenticate(viewer)
    assert api_client.get(url).status_code == 403
    assert api_client.post(f"{url}/expire").status_code == 403
    nothing = user_client.post(f"{url}/preview", {}, format="json").json()
    assert (nothing["commits_expiring"], nothing["bytes_reclaimed"]) == (0, 0)
    # The schedule: one expiry job per catalog with rules.
    from django.core.management import call_command

    assert user_client.put(url, {"rules": [{"pattern": "*", "keep_commits": 5}]}, format="json").status_code == 200
    call_command("lakeui_retention")
    [job] = Job.objects.filter(kind="retention_expire")
    assert wait_for_job(job.id).status == "succeeded"


def test_storage_per_branch_and_table_counts_bytes_only_it_holds_and_shared(user_client, client):
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, ROWS[:2])
    branch_create(catalog=catalog, name="dev", source="main")
    load(catalog, ROWS[2:], branch="dev")
    first, second = DataFile.objects.filter(catalog=catalog).order_by("created_at")
    answer = user_client.get(f"/api/v1/catalogs/{catalog.name}/storage")
    assert answer.status_code == 200, answer.json()
    storage = {b["branch"]: b for b in answer.json()["branches"]}
    assert (storage["main"]["bytes_only"], storage["main"]["bytes_shared"]) == (0, first.size_bytes)
    assert (storage["dev"]["bytes_only"], storage["dev"]["bytes_shared"]) == (second.size_bytes, first.size_bytes)
    [table] = storage["dev"]["tables"]
    assert (table["table"], table["files"]) == ("sales.orders", 2)
    client.force_login(catalog.created_by)
    assert "Show the storage" in client.get(f"/catalogs/{catalog.name}").content.decode()
    page = client.get(f"/catalogs/{catalog.name}?storage=1").content.decode()
    assert "Storage per branch" in page and 'data-table="dev sales.orders"' in page


def _scratch_history(catalog) -> None:
    """A branch `scratch/x` with eight commits of its own, their times spread over the last 30 days."""
    make_table(catalog)
    branch_create(catalog=catalog, name="scratch/x", source="main")
    for index in range(8):
        make_table(catalog, branch="scratch/x", table=f"t{index}")
    commits = list(Commit.objects.filter(catalog=catalog).order_by("seq"))
    start, step = timezone.now() - timedelta(days=30), timedelta(days=29) / len(commits)
    for index, commit in enumerate(commits):
        Commit.objects.filter(id=commit.id).update(created_at=start + step * index)


BAD_RULES = [  # (a rule or a whole body, the field the 400 names)
    ({"pattern": "scratch/*", "keep_commits": 1.0}, "keep_commits"),
    ({"pattern": "scratch/*", "keep_days": "3"}, "keep_days"),
    ({"pattern": 5, "keep_days": 3}, "pattern"),
    ({"pattern": "scratch/*", "keep_days": True}, "keep_days"),
    ({"pattern": "scratch/*", "keep_commits": False}, "keep_commits"),
    ({"pattern": "scratch/*", "keep_dayz": 3}, "keep_dayz"),
    ({"pattern": "scratch/*", "keep_days": 1_000_001}, "keep_days"),
    ({"pattern": "scratch/*", "keep_commits": 2**63}, "keep_commits"),
    ({"pattern": ["scratch/*"]}, "pattern"),
    ("scratch/*", "non_field_errors"),
    ({"rules": [{"pattern": "scratch/*", "keep_days": 1}], "dry_run": True}, "dry_run"),
    ({"rules": [{"pattern": "scratch/*", "keep_days": 1}] * 101}, "rules"),
]


def _named(details, field: str) -> bool:
    """Whether a 400's details name the field (at the top, or in the rule that holds it)."""
    if isinstance(details, dict):
        return field in details or any(_named(value, field) for value in details.values())
    if isinstance(details, list):
        return any(_named(item, field) for item in details)
    return False


def test_retention_refuses_rules_of_the_wrong_type_and_changes_nothing(user_client):
    catalog = make_catalog()
    _scratch_history(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/retention"
    saved = [{"pattern": "scratch/*", "keep_days": 3, "keep_commits": None}]
    assert user_client.put(url, {"rules": saved}, format="json").json()["rules"] == saved
    for rule, field in BAD_RULES:
        body = rule if "rules" in rule else {"rules": [rule]}
        for method, path in (("put", url), ("post", f"{url}/preview")):
            response = getattr(user_client, method)(path, body, format="json")
            assert response.status_code == 400, (method, rule, response.json())
            answer = response.json()
            assert answer["code"] == "invalid_input" and answer["message"], answer
            assert _named(answer["details"], field), (method, rule, answer)
        # Expiry takes the saved rules: a body naming rules (good or bad) is refused, not ignored.
        response = user_client.post(f"{url}/expire", body, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_input"), rule
        assert _named(response.json()["details"], "rules"), (rule, response.json())
    assert user_client.get(url).json()["rules"] == saved
    assert not Job.objects.filter(kind="retention_expire").exists()
    assert not ExpiredCommit.objects.exists()

    # A rule saved some other way out of an expiry's range is refused before a job is made.
    from catalog_app.models import RetentionRule

    RetentionRule.objects.filter(catalog=catalog).update(keep_days=5_000_000)
    refused = user_client.post(f"{url}/expire")
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_rules"), refused.json()
    assert "keep_days" in refused.json()["message"]
    assert not Job.objects.filter(kind="retention_expire").exists()


@pytest.mark.parametrize("days", [1_000_000, 800_000])
def test_retention_keeps_everything_for_days_further_back_than_the_calendar(user_client, days):
    catalog = make_catalog()
    _scratch_history(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/retention"
    # The same history loses commits to a short rule: the plan is not empty for want of commits to expire.
    short = user_client.post(f"{url}/preview", {"rules": [{"pattern": "scratch/*", "keep_days": 1}]}, format="json")
    assert short.status_code == 200 and short.json()["commits_expiring"] > 0, short.json()

    rules = [{"pattern": "scratch/*", "keep_days": days}, {"pattern": "main", "keep_days": days, "keep_commits": 1}]
    preview = user_client.post(f"{url}/preview", {"rules": rules}, format="json")
    assert preview.status_code == 200, preview.json()
    plan = preview.json()
    assert (plan["commits_expiring"], plan["files_reclaimed"]) == (0, 0)
    oldest = {ref["ref"]: ref["oldest_kept"]["commit"] for ref in plan["refs"]}
    first = Commit.objects.filter(catalog=catalog).order_by("seq").first().id
    assert oldest == {"main": first, "scratch/x": first}

    assert user_client.put(url, {"rules": rules}, format="json").status_code == 200
    expiry = user_client.post(f"{url}/expire")
    assert expiry.status_code == 202, expiry.json()
    job = wait_for_job(expiry.json()["id"], timeout=120)
    assert job.status == "succeeded", (job.error_code, job.error_message)
    assert job.result["commits_expiring"] == 0
    assert not ExpiredCommit.objects.exists()
