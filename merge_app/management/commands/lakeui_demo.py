"""`make run`'s demo: the admin login, and a catalog `demo` with data on main and two branches to merge.

The catalog is seeded through the real services, with every data load a real job run in this process on Spark
(`job_execute`), so the demo needs no worker to be up yet; a worker that receives the same job later finds it
done. Seeding is idempotent: a finished demo is marked by the tag `seeded` and left alone; a demo catalog a
failed run left half-built is removed and seeded again.
"""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from catalog_app.models import Catalog
from catalog_app.selectors.access import protected_branch_list
from catalog_app.selectors.refs import catalog_find, tag_exists
from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.commits import WriteTarget
from catalog_app.services.data_submit import table_data_submit
from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create, catalog_create, catalog_delete, tag_create
from catalog_app.services.tables import column_add, table_create, table_update
from lakeui.jobs.models import Job
from lakeui.jobs.services import JobOutcome, job_execute, job_wait
from merge_app.models import MergeRequest
from merge_app.services.merge_requests import merge_request_open

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "lakeui-admin"  # the default of make run; set LAKEUI_ADMIN_PASSWORD anywhere else
DEMO_REVIEWER = "reviewer"  # a second user, approver in the demo catalog: the approval gate can be tried
DEMO_REVIEWER_PASSWORD = "lakeui-reviewer"  # set LAKEUI_REVIEWER_PASSWORD anywhere else
TOKEN_COMMAND = ".venv/bin/python manage.py drf_create_token"  # DRF's: a user's API token, made if missing
DEMO_CATALOG = "demo"
DEMO_DESCRIPTION = "Demo catalog seeded by `manage.py lakeui_demo`: orders and customers, two branches to merge."
DONE_TAG = "seeded"
DEMO_REQUEST = {
    "source": "feature-discounts", "target": "main", "title": "Discounts on orders",
    "description": "Adds the discount column to sales.orders and two discounted orders.",
}  # fmt: skip
JOB_TIMEOUT = 600

ORDER_COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]
CUSTOMER_COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "name", "type": "string"},
    {"name": "country", "type": "string"},
]


def _orders(*ids, region="eu", **extra):
    return [{"id": i, "amount": 10 * i, "region": region, **extra} for i in ids]


class Command(BaseCommand):
    help = "Create the demo admin user and the demo catalog (both idempotent) and print how to sign in."

    def add_arguments(self, parser):
        parser.add_argument("--no-catalog", action="store_true", help="Only the admin user, no demo catalog")

    def handle(self, *args, no_catalog=False, **options):
        user, created = get_user_model().objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True, "email": "admin@example.com"}
        )
        password = os.environ.get("LAKEUI_ADMIN_PASSWORD") or DEMO_PASSWORD
        if created:
            user.set_password(password)
            user.save()
        token, _ = Token.objects.get_or_create(user=user)
        reviewer, reviewer_created = get_user_model().objects.get_or_create(username=DEMO_REVIEWER)
        reviewer_password = os.environ.get("LAKEUI_REVIEWER_PASSWORD") or DEMO_REVIEWER_PASSWORD
        if reviewer_created:
            reviewer.set_password(reviewer_password)
            reviewer.save()
        if not no_catalog:
            self.seed(user)
            self.protect(user)
        shown = password if created else "as set when it was created"
        reviewer_shown = reviewer_password if reviewer_created else "as set when it was created"
        reviewer_token, _ = Token.objects.get_or_create(user=reviewer)
        self.stdout.write(
            self.style.SUCCESS(
                "\nLakeUI demo logins\n"
                f"  browser:  http://127.0.0.1:8000/  (user {DEMO_USERNAME}, password {shown})\n"
                f"  reviewer: user {DEMO_REVIEWER}, password {reviewer_shown} (approver in {DEMO_CATALOG}: approves "
                f"the merge requests into its protected main)\n"
                f"  demo:     http://127.0.0.1:8000/catalogs/{DEMO_CATALOG}  (diff: "
                f"/catalogs/{DEMO_CATALOG}/diff?from=cleanup&to=main)\n"
                f"  API:      curl -H 'Authorization: Token {token.key}' http://127.0.0.1:8000/api/v1/jobs\n"
                f"            as {DEMO_REVIEWER}: -H 'Authorization: Token {reviewer_token.key}'; any other user's "
                f"token: {TOKEN_COMMAND} USERNAME\n"
                "  API docs: http://127.0.0.1:8000/api/docs\n"
            )
        )

    def seed(self, user) -> None:
        existing = catalog_find(name=DEMO_CATALOG)
        if existing is not None:
            if tag_exists(catalog=existing, name=DONE_TAG):
                self.stdout.write(f"The demo catalog {DEMO_CATALOG!r} is already seeded.")
                self.merge_request(existing, user)
                return
            if existing.description != DEMO_DESCRIPTION:
                self.stdout.write(f"A catalog {DEMO_CATALOG!r} exists that the demo did not make; not seeding.")
                return
            self.stdout.write("Removing the half-seeded demo catalog of an earlier run.")
            catalog_delete(catalog=existing)
        self.stdout.write("Seeding the demo catalog (data loads run on Spark here; the first takes a while)...")
        catalog = catalog_create(name=DEMO_CATALOG, description=DEMO_DESCRIPTION, created_by=user)

        def on(branch: str, message: str = "") -> WriteTarget:
            return WriteTarget(catalog=catalog, branch=branch, author=user, message=message)

        def load(branch: str, table: str, rows: list[dict], message: str) -> None:
            self.data_job(on(branch, message), table, "table_load", {"strategy": "append_only", "rows": rows})

        database_create(target=on("main"), name="sales", properties={"owner": "analytics"}, comment="Orders")
        # Orders have a key, so an upsert by key changes cells (the diff shows `old → new`) and merges go by key.
        table_create(target=on("main"), database="sales", name="orders", columns=ORDER_COLUMNS, primary_key=["id"])
        table_create(target=on("main"), database="sales", name="customers", columns=CUSTOMER_COLUMNS)
        load("main", "orders", _orders(1, 2, 3, 4, 5, 6), "Initial orders")
        customers = [{"id": 1, "name": "Ada", "country": "UK"}, {"id": 2, "name": "Linus", "country": "FI"}]
        load("main", "customers", customers, "Initial customers")
        tag_create(catalog=catalog, name="v1", ref="main", created_by=user)

        # A branch that merges cleanly: a new column and rows written with it.
        branch_create(catalog=catalog, name="feature-discounts", source="main", created_by=user)
        column_add(target=on("feature-discounts"), database="sales", table="orders",
                   spec={"name": "discount", "type": "int", "nullable": True})  # fmt: skip
        load("feature-discounts", "orders", _orders(7, 8, discount=5), "Discounted orders")

        # A branch that conflicts with main: it deletes order 2, which main corrects after the fork (by key, a key
        # deleted on one side and updated on the other is a conflict; its new order 9 merges).
        branch_create(catalog=catalog, name="cleanup", source="main", created_by=user)
        self.data_job(on("cleanup", "Remove test order 2"), "orders", "table_delete", {"where": "id = 2"})
        load("cleanup", "orders", _orders(9), "Re-enter order 9")

        # Main moves on after both forks.
        load("main", "orders", _orders(10, 11, region="apac"), "APAC orders")
        corrected = {"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 2, "amount": 25, "region": "eu"}]}
        self.data_job(on("main", "Correct order 2"), "orders", "table_load", corrected)
        table_update(target=on("main"), database="sales", name="customers", set_properties={"pii": "true"})
        tag_create(catalog=catalog, name=DONE_TAG, ref="main", created_by=user)
        self.merge_request(catalog, user)
        self.stdout.write(self.style.SUCCESS(f"Seeded the demo catalog {DEMO_CATALOG!r}."))

    def protect(self, user) -> None:
        """main of the demo protected (one approval from another user), the reviewer its approver; idempotent.
        After seeding, which writes to main directly."""
        catalog = catalog_find(name=DEMO_CATALOG)
        if catalog is None or catalog.description != DEMO_DESCRIPTION:
            return
        if not tag_exists(catalog=catalog, name=DONE_TAG):
            return
        catalog_role_grant(catalog=catalog, username=DEMO_REVIEWER, role="approver", granted_by=user)
        if "main" not in {rule.pattern for rule in protected_branch_list(catalog=catalog)}:
            protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, created_by=user)
            self.stdout.write("  main protected: merges only through a merge request approved by another user")

    def merge_request(self, catalog: Catalog, user) -> None:
        """An open merge request of the clean branch (once: none is opened again when one was ever opened for it).
        Its plan is a job a worker runs once it is up."""
        if MergeRequest.objects.filter(catalog=catalog, source=DEMO_REQUEST["source"]).exists():
            return
        opened = merge_request_open(catalog=catalog, author=user, **DEMO_REQUEST)
        self.stdout.write(f"  merge request !{opened.number}: {opened.title}")

    def data_job(self, target: WriteTarget, table: str, kind: str, params: dict) -> None:
        job = table_data_submit(target=target, database="sales", table=table, kind=kind, params=params)
        if job_execute(job_id=str(job.id), worker="lakeui_demo") is JobOutcome.BUSY:
            job_wait(job, timeout=JOB_TIMEOUT)  # a worker took it first: wait for its run
        job.refresh_from_db()
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(f"Demo job {job.kind} failed: {job.error_code} {job.error_message}")
        self.stdout.write(f"  {kind} on {target.branch}: {target.message or table}")
