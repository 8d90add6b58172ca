"""The retention page (frontend/views/retention.py), through Django's test client with CSRF enforced: an admin
previews typed rules (nothing saved), saves them, is refused a bad number with a message, and starts an expiry job;
an editor gets no page."""

import html

import pytest
from django.contrib.auth import get_user_model

from catalog_app.models import RetentionRule
from catalog_app.services.access import catalog_role_grant
from lakeui.jobs.models import Job
from tests.frontend.test_checks_pages import post, signed_in
from tests.support.catalogs import make_catalog, make_table

pytestmark = pytest.mark.django_db

PAGE = "/catalogs/lake/retention"


def test_an_admin_previews_saves_and_expires(user):
    catalog = make_catalog()
    make_table(catalog)  # three commits on main: the catalog's, the database's, the table's
    admin = signed_in("alice")
    assert "Retention" in admin.get("/catalogs/lake").content.decode()
    rules = {"pattern": ["main", ""], "keep_days": ["", ""], "keep_commits": ["1", ""]}

    previewed = post(admin, PAGE, {**rules, "action": "preview"}, page=PAGE)
    page = html.unescape(previewed.content.decode())
    assert previewed.status_code == 200 and "2 commits would expire" in page
    assert not RetentionRule.objects.exists()

    bad = post(admin, PAGE, {**rules, "keep_commits": ["0", ""], "action": "save"}, page=PAGE)
    assert bad.status_code == 400 and "keep_commits must be a whole number" in html.unescape(bad.content.decode())
    assert not RetentionRule.objects.exists()

    saved = post(admin, PAGE, {**rules, "action": "save"}, page=PAGE, follow=True)
    assert "Retention rules saved" in saved.content.decode()
    assert list(RetentionRule.objects.values_list("pattern", "keep_commits")) == [("main", 1)]
    assert 'value="main"' in admin.get(PAGE).content.decode()

    started = post(admin, PAGE, {"action": "expire"}, page=PAGE)
    job = Job.objects.get(kind="retention_expire")
    assert started.status_code == 302 and str(job.id) in started["Location"]


def test_an_editor_has_no_retention_page(user):
    catalog = make_catalog()
    get_user_model().objects.create_user("bob")
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=user)
    bob = signed_in("bob")
    assert bob.get(PAGE).status_code == 403
    assert "Retention" not in bob.get("/catalogs/lake").content.decode()
