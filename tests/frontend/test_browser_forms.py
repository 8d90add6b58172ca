"""Forms laid out as they read (issue 41), in real Chromium: the load form's strategy fields one under the other,
each label above its own input; the webhook form's event checkboxes each on its own line beside its own name; and
after adding a webhook, its own page at its own URL."""

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import screenshot
from tests.frontend.test_browser import sign_in
from tests.support.catalogs import make_catalog, make_table

pytestmark = pytest.mark.django_db(transaction=True)


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None
    return box


def test_the_load_forms_strategy_fields_are_one_under_the_other(page, user):
    catalog = make_catalog(user=user)
    make_table(catalog)
    sign_in(page, "alice", "alice-password")
    page.goto(f"/catalogs/{catalog.name}/browse/sales/orders?ref=main")
    fields = page.locator("#load fieldset input")
    assert fields.count() >= 3
    tops = []
    for i in range(fields.count()):
        field = fields.nth(i)
        label = page.locator(f"label[for='{field.get_attribute('id')}']")
        label_box, field_box = _box(label), _box(field)
        assert label_box["y"] + label_box["height"] <= field_box["y"] + 1, field.get_attribute("id")  # label above
        assert abs(label_box["x"] - field_box["x"]) < 2  # aligned, not side by side
        tops.append(field_box["y"])
    assert tops == sorted(tops) and len(set(tops)) == len(tops)  # one field per line
    page.locator("#load").scroll_into_view_if_needed()
    screenshot(page, "table-load-form")


def test_webhook_checkboxes_sit_beside_their_own_names_and_a_new_webhook_shows_at_its_url(page, user):
    catalog = make_catalog(user=user)
    sign_in(page, "alice", "alice-password")
    page.goto(f"/catalogs/{catalog.name}/webhooks")
    labels = page.locator("fieldset label:has(input[name=events])")
    boxes = page.locator("fieldset input[type=checkbox][name=events]")
    assert labels.count() == boxes.count() > 10
    lines = []
    for i in range(labels.count()):
        label = labels.nth(i)
        box = label.locator("input")
        name = label.locator("code") if box.get_attribute("value") != "*" else label
        checkbox, text = _box(box), _box(name)
        middle = checkbox["y"] + checkbox["height"] / 2
        assert text["y"] <= middle <= text["y"] + text["height"], box.get_attribute("value")  # on its name's line
        assert checkbox["x"] < text["x"] or box.get_attribute("value") == "*"  # before its name
        lines.append(round(checkbox["y"]))
    assert len(set(lines)) == len(lines) == boxes.count()  # each on its own line
    screenshot(page, "webhooks-form")

    page.get_by_label("Payload URL").fill("http://127.0.0.1:9/hook")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#new-secret")).to_be_visible()
    assert page.url.rstrip("/").split("/")[-2:] == ["webhooks", page.url.rstrip("/").split("/")[-1]]
    assert page.url.rstrip("/").split("/")[-1].isdigit(), page.url
    page.reload()  # the secret was shown once; reloading does not post the form again
    expect(page.locator("#new-secret")).to_have_count(0)
    screenshot(page, "webhook-added")


def test_the_commit_pages_revert_and_cherry_pick_are_two_forms_defaulting_to_branches_they_can_act_on(page, user):
    """A commit made on hotfix (a table created there): `aaa`, first by name, lacks it."""
    from catalog_app.services.refs import branch_create
    from tests.support.catalogs import head

    catalog = make_catalog(user=user)
    for name in ("aaa", "hotfix"):
        branch_create(catalog=catalog, name=name, source="main")
    make_table(catalog, branch="hotfix")
    commit = head(catalog, "hotfix")
    sign_in(page, "alice", "alice-password")
    page.goto(f"/catalogs/{catalog.name}/commits/{commit}")
    revert = page.get_by_role("form", name="Revert")
    pick = page.get_by_role("form", name="Cherry-pick")
    expect(revert.get_by_role("combobox")).to_have_value("hotfix")
    expect(pick.get_by_role("combobox")).to_have_value("main")
    expect(revert.get_by_role("button")).to_have_text("Revert on branch")
    expect(pick.get_by_role("button")).to_have_text("Cherry-pick onto branch")
    screenshot(page, "commit-actions")
