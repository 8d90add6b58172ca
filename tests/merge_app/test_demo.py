"""`manage.py lakeui_demo` (run by `make run`): the demo catalog whose diff page shows a red and a green cell, with
`sales.orders` keyed by `id` (an upsert by key changes cells, merges go key by key)."""

import pytest
from django.core.management import call_command

from catalog_app.models import Catalog, Commit
from catalog_app.selectors.access import catalog_with_role
from catalog_app.services.refs import catalog_create
from merge_app.models import MergeRequest
from merge_app.selectors.diff import diff_as_dict
from merge_app.services.merge_plans import merge_plan
from tests.support.catalogs import head

pytestmark = pytest.mark.django_db(transaction=True)


def orders_diff(catalog, source):
    """sales.orders in the diff of `source` into main, compared by key here (as a worker does for the pages)."""
    diff = diff_as_dict(merge_plan(catalog=catalog, source=source, target="main", in_worker=True).diff)
    [orders] = [o for o in diff["objects"] if o["name"] == "sales.orders"]
    return diff, orders


def test_demo_seeds_branches_to_merge_once(capsys):
    call_command("lakeui_demo")
    catalog = Catalog.objects.get(name="demo")
    assert sorted(catalog.branches.values_list("name", flat=True)) == ["cleanup", "feature-discounts", "main"]
    assert sorted(catalog.tags.values_list("name", flat=True)) == ["seeded", "v1"]
    # cleanup deleted order 2, which main corrected since: a conflict on that key, and nothing else conflicts.
    diff, orders = orders_diff(catalog, "cleanup")
    assert (diff["mergeable"], diff["counts"]["conflicts"], orders["verdict"]) == (False, 1, "conflict")
    [key] = orders["keys"]["listed"]
    assert (key["key"], key["source_change"], key["target_change"]) == ({"id": 2}, "delete", "update")
    assert (key["base"]["amount"], key["source"], key["target"]["amount"]) == (20, None, 25)
    # feature-discounts merges cleanly: its new column and two orders beside main's new orders.
    diff, orders = orders_diff(catalog, "feature-discounts")
    assert (diff["mergeable"], orders["verdict"], orders["keys"]["conflicts"]) == (True, "ok", 0)
    assert orders["keys"]["source"] == {"insert": 2, "update": 0, "delete": 0}
    commits, main = Commit.objects.filter(catalog=catalog).count(), head(catalog)
    [request] = MergeRequest.objects.filter(catalog=catalog)
    assert (request.source, request.target, request.state) == ("feature-discounts", "main", "open")
    assert catalog_with_role(user=request.author, name=catalog.name)[1] == "admin"
    # The approval gate can be tried: main is protected and a second user, printed with the admin, approves.
    from django.contrib.auth import get_user_model

    printed = capsys.readouterr().out
    assert "user admin, password lakeui-admin" in printed and "user reviewer, password lakeui-reviewer" in printed
    assert list(catalog.protected_branches.values_list("pattern", "required_approvals")) == [("main", 1)]
    reviewer = get_user_model().objects.get(username="reviewer")
    assert reviewer.check_password("lakeui-reviewer")
    assert catalog_with_role(user=reviewer, name=catalog.name)[1] == "approver"

    call_command("lakeui_demo")
    assert "already seeded" in capsys.readouterr().out
    assert (Commit.objects.filter(catalog=catalog).count(), head(catalog)) == (commits, main)
    assert MergeRequest.objects.filter(catalog=catalog).count() == 1


def test_demo_leaves_a_catalog_it_did_not_make_alone(capsys):
    catalog_create(name="demo", description="mine")
    call_command("lakeui_demo")
    assert "not seeding" in capsys.readouterr().out
    assert Catalog.objects.get(name="demo").branches.count() == 1


@pytest.mark.django_db
def test_demo_output_says_how_the_reviewer_and_any_other_user_get_an_api_token(capsys):
    """The second user's token is printed with the admin's, and the command that makes any user's token, which
    works as printed."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    call_command("lakeui_demo", "--no-catalog")
    printed = capsys.readouterr().out
    reviewer = get_user_model().objects.get(username="reviewer")
    assert f"as reviewer: -H 'Authorization: Token {Token.objects.get(user=reviewer).key}'" in printed, printed
    assert "any other user's token: .venv/bin/python manage.py drf_create_token USERNAME" in printed
    get_user_model().objects.create_user(username="carol")
    call_command("drf_create_token", "carol")
    assert Token.objects.get(user__username="carol").key in capsys.readouterr().out
