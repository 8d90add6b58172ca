"""CI's second stage: the README's five-minute tour, run as a script against the stack `make run` starts.

On a clean `var/` (all but `var/test`, which `make test` keeps), it starts `make run` with no environment of
LakeUI's set, in a process group of its own with its output in `var/readme-tour/make-run.log`, waits for
`/api/v1/health` to say ok, reads the admin and reviewer tokens `make run` printed, and walks the tour: the API
with the printed token, the `lakeui` CLI after `lakeui login`, the Python client, a pyiceberg append and delete on
a branch through the Iceberg REST catalog, retention rules with their preview and an expiry, storage per branch, the
merge queue, merge requests approved by `reviewer` and merged, and a headless Chromium signed in as admin over the
tour's pages. Then it stops the stack as Ctrl-C does and checks that nothing of it is left running.

Any step that fails, and any answer of 500 or more, ends the run with exit status 1 and a message naming the step,
the request and the first lines of the answer (and the end of `make run`'s log). Each step is a function of a
`Tour`, the small session below, so a test can run a step against any server (tests/ci/test_readme_tour.py).

    .venv/bin/python .ci/readme_tour.py                      # what .ci/run does: start, tour, stop, check
    .venv/bin/python .ci/readme_tour.py --no-start --base-url http://127.0.0.1:8100 --log var/run.log
"""

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
WORK = VAR / "readme-tour"
KEEP_IN_VAR = {"test"}  # `make test`'s folder: the stage runs after the suite and leaves it alone
CATALOG = "demo"
ADMIN, ADMIN_PASSWORD = "admin", "lakeui-admin"  # the demo's login (no LAKEUI_ADMIN_PASSWORD: the default)
START_TIMEOUT = 480.0  # install check, migrate, the demo's Spark loads, and the workers up
JOB_TIMEOUT = 240.0
STOP_GRACE = 60.0  # after Ctrl-C's SIGINT, before SIGTERM (`manage.py serve` gives its processes 30 s)
TERM_GRACE = 20.0
LEFTOVER_WAIT = 20.0
BODY_LINES = 12
# What `make run` must not inherit: it is started as a newcomer starts it, with nothing set (every variable of
# docs/configuration.md: LAKEUI_* and these; the machine's SPARK_LOCAL_IP and XDG_CONFIG_HOME stay).
STACK_ENV_DROP = (
    "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS", "LOG_LEVEL", "SPARK_MASTER", "SPARK_DRIVER_MEMORY", "WEB_CONCURRENCY",
)  # fmt: skip
STACK_ENV_DROP_PREFIX = "LAKEUI_"
CHROMIUM = os.environ.get("LAKEUI_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# What the UI's error pages (and Django's debug page) carry: a tour page showing one failed.
ERROR_PAGE_TITLES = ("Error", "Not found", "Server error", "Page not found", "Server Error")
ERROR_PAGE_MARKS = ("Traceback", 'id="traceback"', "Something went wrong", "That did not work")


class StepFailed(Exception):
    """A step of the tour failed; the message says what was asked and what came back."""


def first_lines(text: str, count: int = BODY_LINES) -> str:
    lines = text.strip().splitlines()
    cut = lines[:count] + ([f"... ({len(lines) - count} more lines)"] if len(lines) > count else [])
    return "\n".join("    " + line[:300] for line in cut) or "    (empty)"


@dataclass
class Tour:
    """The tour's session: the server, the two tokens `make run` printed, a scratch folder, and what one step
    leaves for the next (`facts`: merge request numbers, heads)."""

    base: str
    token: str = ""
    reviewer_token: str = ""
    work: Path = WORK
    facts: dict = field(default_factory=dict)
    http: httpx.Client = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.base = self.base.rstrip("/")
        self.http = self.http or httpx.Client(base_url=self.base, timeout=120)

    def call(self, method: str, path: str, *, as_reviewer: bool = False, ok=(200, 201, 202, 204), **kwargs):
        """One API request; any other status than `ok` (every 5xx) fails the step with the request and the body."""
        token = self.reviewer_token if as_reviewer else self.token
        headers = {"Authorization": f"Token {token}"} if token else {}
        try:
            response = self.http.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise StepFailed(f"{method} {path}: no answer ({type(exc).__name__}: {exc})") from exc
        if response.status_code not in ok:
            raise StepFailed(f"{method} {path} answered {response.status_code}:\n{first_lines(response.text)}")
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise StepFailed(f"{method} {path} answered {response.status_code} with no JSON:\n"
                             f"{first_lines(response.text)}") from exc  # fmt: skip

    def api(self, method: str, path: str, **kwargs):
        return self.call(method, f"/api/v1/{path.lstrip('/')}", **kwargs)

    def complete(self, path: str, *, timeout: float = JOB_TIMEOUT, **kwargs) -> dict:
        """A read a worker may answer (rows, diffs): read again while it says `complete: false`."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.api("GET", path, **kwargs)
            if not isinstance(answer, dict) or answer.get("complete", True):
                return answer
            if time.monotonic() > deadline:
                raise StepFailed(f"GET {path} still incomplete after {timeout:.0f} s: {json.dumps(answer)[:500]}")
            time.sleep(0.5)

    def job(self, job: dict, *, timeout: float = JOB_TIMEOUT) -> dict:
        """Follow a job (an answer holding its `id`) until it has finished; anything but `succeeded` fails."""
        job_id = job.get("id") if isinstance(job, dict) else None
        if not job_id:
            raise StepFailed(f"expected a job, got {json.dumps(job)[:500]}")
        deadline = time.monotonic() + timeout
        while True:
            found = self.api("GET", f"jobs/{job_id}")
            if found["status"] == "succeeded":
                return found
            if found["status"] in ("failed", "cancelled"):
                raise StepFailed(f"job {job_id} ({found.get('kind')}) {found['status']}: {found.get('error_code')}: "
                                 f"{found.get('error_message')}")  # fmt: skip
            if time.monotonic() > deadline:
                raise StepFailed(f"job {job_id} ({found.get('kind')}) still {found['status']} after {timeout:.0f} s")
            time.sleep(0.5)

    def rows(self, ref: str, table: str = "orders") -> list[list]:
        answer = self.complete(f"catalogs/{CATALOG}/refs/{ref}/databases/sales/tables/{table}/rows",
                               params={"page_size": 500})  # fmt: skip
        return answer["rows"]

    def ids(self, ref: str) -> set:
        return {row[0] for row in self.rows(ref)}


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


def login_environment(tour: Tour) -> dict[str, str]:
    """This process's environment as a user who ran `lakeui login` has it: the saved login in the tour's own config
    folder (so a developer's own login is left alone), no LAKEUI_URL or LAKEUI_TOKEN to win over it."""
    env = {k: v for k, v in os.environ.items() if k not in ("LAKEUI_URL", "LAKEUI_TOKEN")}
    env["XDG_CONFIG_HOME"] = str(tour.work / "config")
    return env


@contextlib.contextmanager
def logged_in(tour: Tour):
    """This process in `login_environment` for a while (the Python client reads it when it is made)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(login_environment(tour))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli(tour: Tour, *args: str, token: str | None = None) -> str:
    """`.venv/bin/lakeui ARGS` as the README runs it, after `lakeui login`; `token` is `LAKEUI_TOKEN=...` before
    the command."""
    env = login_environment(tour)
    if token:
        env["LAKEUI_TOKEN"] = token
    command = [str(ROOT / ".venv" / "bin" / "lakeui"), *args]
    shown = " ".join(["LAKEUI_TOKEN=<reviewer token>"] * bool(token) + ["lakeui", *args])
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT,
                              cwd=ROOT)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"`{shown}` did not finish within {JOB_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        raise StepFailed(f"`{shown}` exited {done.returncode}:\n{first_lines(done.stderr + done.stdout)}")
    return done.stdout


# The steps, in the README's order. Each takes the session and fails by raising StepFailed.


def step_catalogs(tour: Tour) -> None:
    names = [catalog["name"] for catalog in tour.api("GET", "catalogs")["results"]]
    expect(CATALOG in names, f"GET /api/v1/catalogs lists {names}, not the demo catalog {CATALOG!r}")


def step_deep_health(tour: Tour) -> None:
    """The signed-in health check that runs a real Spark job: 202 while it runs, then Spark's version."""
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        answer = tour.api("GET", "health/deep", params={"timeout": 5})
        spark = answer.get("parts", {}).get("spark", {})
        if answer.get("status") == "ok" and spark.get("status") == "ok":
            return
        if spark.get("status") not in (None, "pending") or time.monotonic() > deadline:
            raise StepFailed(f"GET /api/v1/health/deep: {json.dumps(answer)[:800]}")
        time.sleep(1)


def step_branch_and_tag(tour: Tour) -> None:
    """A branch and a tag read by name with the printed token (the reads that once answered 500)."""
    main = tour.api("GET", f"catalogs/{CATALOG}/branches/main")
    expect(main.get("name") == "main" and main.get("head"), f"branch main: {main}")
    tag = tour.api("GET", f"catalogs/{CATALOG}/tags/v1")
    expect(tag.get("name") == "v1" and tag.get("commit"), f"tag v1: {tag}")
    missing = tour.api("GET", f"catalogs/{CATALOG}/branches/nope", ok=(404,))
    expect(missing.get("code") == "branch_not_found", f"a missing branch answered {missing}")
    tour.facts["main_head"] = main["head"]


def step_rows(tour: Tour) -> None:
    ids = tour.ids("main")
    expect({1, 2, 10, 11} <= ids, f"main's sales.orders holds ids {sorted(ids)}: the demo's rows are missing")
    expect(tour.ids("v1") < ids, "the tag v1 should hold fewer orders than main")


def step_branch(tour: Tour) -> None:
    """1. Branch: `fix-amounts` from main."""
    made = tour.api("POST", f"catalogs/{CATALOG}/branches", json={"name": "fix-amounts", "from": "main"})
    bad = tour.api("POST", f"catalogs/{CATALOG}/branches", json={"name": "fix amounts!", "from": "main"}, ok=(400,))
    expect(bad.get("code") and bad.get("message"), f"a bad branch name answered {bad}, not the API's error JSON")
    expect(made.get("head") == tour.facts.get("main_head", made.get("head")), f"fix-amounts: {made}")


def step_load(tour: Tour) -> None:
    """2. Load: upsert two rows by key on fix-amounts; the job succeeds with one row updated, one inserted."""
    rows = [{"id": 1, "amount": 15, "region": "eu"}, {"id": 100, "amount": 40, "region": "us"}]
    path = f"catalogs/{CATALOG}/refs/fix-amounts/databases/sales/tables/orders/load"
    job = tour.job(tour.api("POST", path, json={"strategy": "upsert", "key_columns": ["id"], "rows": rows}))
    result = job.get("result") or {}
    expect(result.get("rows_inserted") == 1 and result.get("rows_updated") == 1,
           f"the upsert's job result: {result} (expected one row updated, one inserted)")  # fmt: skip
    amounts = {row[0]: row[1] for row in tour.rows("fix-amounts")}
    expect(amounts.get(1) == 15 and amounts.get(100) == 40, f"fix-amounts after the upsert: {amounts}")


def step_diffs(tour: Tour) -> None:
    """3. Review: the diff into main merges cleanly, the cleanup branch conflicts."""
    clean = tour.complete(f"catalogs/{CATALOG}/diff", params={"from": "fix-amounts", "to": "main"})
    conflicts = clean.get("counts", {}).get("conflicts")
    expect(conflicts == 0, f"fix-amounts into main: {conflicts} conflicts ({json.dumps(clean)[:400]})")
    conflicting = tour.complete(f"catalogs/{CATALOG}/diff", params={"from": "cleanup", "to": "main"})
    expect(conflicting.get("counts", {}).get("conflicts", 0) > 0,
           f"cleanup into main shows no conflict: {json.dumps(conflicting)[:400]}")  # fmt: skip
    tour.api("GET", f"catalogs/{CATALOG}/diff/rows", params={"from": "fix-amounts", "to": "main"})


def step_merge_request(tour: Tour) -> None:
    """4 and 5. A merge request into the protected main: blocked until `reviewer` approves, then merged."""
    opened = tour.api("POST", f"catalogs/{CATALOG}/merge-requests",
                      json={"source": "fix-amounts", "target": "main", "title": "Fix amounts"})  # fmt: skip
    number = opened["number"]
    tour.facts["mr"] = number
    if opened.get("plan_job"):
        tour.job(opened["plan_job"])
    path = f"catalogs/{CATALOG}/merge-requests/{number}"
    tour.api("POST", f"{path}/merge", ok=(403, 409))  # not approved yet: refused with its blocker
    tour.api("POST", f"{path}/reviews", as_reviewer=True, json={"decision": "approve", "comment": "tour"})
    tour.job(tour.api("POST", f"{path}/merge"))
    state = tour.api("GET", path)["state"]
    expect(state == "merged", f"merge request !{number} is {state!r} after its merge job succeeded")
    expect(100 in tour.ids("main"), "main lacks the row fix-amounts upserted after the merge")


def step_cli(tour: Tour) -> None:
    """The same from the shell: the README's `lakeui` commands, after `lakeui login`."""
    csv = tour.work / "orders.csv"
    csv.write_text("id,amount,region\n3,30,apac\n101,55,us\n")
    cli(tour, "login", tour.base, "--token", tour.token)
    cli(tour, "branch", "create", CATALOG, "fix-regions", "--from", "main")
    cli(tour, "load", CATALOG, "fix-regions", "sales.orders", str(csv), "--strategy", "upsert", "--key", "id")
    cli(tour, "diff", CATALOG, "fix-regions", "--into", "main")
    opened = json.loads(cli(tour, "--json", "mr", "open", CATALOG, "fix-regions", "--into", "main",
                            "--title", "Fix regions"))  # fmt: skip
    number = str(opened["number"])
    cli(tour, "mr", "approve", CATALOG, number, token=tour.reviewer_token)
    cli(tour, "mr", "merge", CATALOG, number)
    out = cli(tour, "sql", CATALOG, "SELECT region, count(*) FROM sales.orders GROUP BY region")
    expect("apac" in out and "us" in out, f"`lakeui sql` printed no apac and us groups:\n{first_lines(out)}")
    expect(101 in tour.ids("main"), "main lacks the row the CLI loaded after `lakeui mr merge`")


def step_python_client(tour: Tour) -> None:
    """The Python client, as in docs/clients.md's CI example."""
    from lakeui_client import Client
    from lakeui_client.errors import LakeUIError

    try:
        with logged_in(tour), Client() as lake:  # the login step_cli saved, as docs/clients.md shows
            head = lake.branch(CATALOG, "main")["head"]
            expect(bool(head), "Client().branch(demo, main) has no head")
            names = {branch["name"] for branch in lake.branches(CATALOG)}
            expect({"main", "fix-amounts", "fix-regions"} <= names, f"Client().branches: {sorted(names)}")
            page = lake.rows(CATALOG, "main", "sales.orders", page_size=500)
            expect(len(page["rows"]) >= 10, f"Client().rows: {len(page['rows'])} rows")
    except LakeUIError as exc:
        raise StepFailed(f"the Python client: {type(exc).__name__}: {exc}") from exc


def step_iceberg(tour: Tour) -> None:
    """pyiceberg appends and deletes on a branch through the Iceberg REST catalog."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import RESTError

    tour.api("POST", f"catalogs/{CATALOG}/branches", json={"name": "ice-tour", "from": "main"})
    try:
        lake = RestCatalog("lake", uri=f"{tour.base}/iceberg/{CATALOG}/ice-tour", token=tour.token)
        orders = lake.load_table("sales.orders")
        schema = orders.schema().as_arrow()
        rows = [{"id": 200, "amount": 7, "region": "ice"}, {"id": 201, "amount": 8, "region": "ice"}]
        orders.append(pa.Table.from_pylist(rows, schema=schema))
        orders.delete("id = 201")
    except (RESTError, OSError, ValueError) as exc:
        raise StepFailed(f"pyiceberg on ice-tour: {type(exc).__name__}: {exc}") from exc
    ids = tour.ids("ice-tour")
    expect(200 in ids and 201 not in ids, f"ice-tour after pyiceberg's append and delete: ids {sorted(ids)}")


def step_retention(tour: Tour) -> None:
    """Retention rules, their preview and an expiry (docs/retention.md): ice-tour keeps its newest commit."""
    rules = [{"pattern": "ice-tour", "keep_commits": 1}]
    tour.api("PUT", f"catalogs/{CATALOG}/retention", json={"rules": rules})
    preview = tour.api("POST", f"catalogs/{CATALOG}/retention/preview", json={})
    expect(preview.get("commits_expiring", 0) >= 1, f"the preview expires nothing: {json.dumps(preview)[:500]}")
    job = tour.job(tour.api("POST", f"catalogs/{CATALOG}/retention/expire"))
    expect((job.get("result") or {}).get("commits_expiring", 0) >= 1, f"the expiry's result: {job.get('result')}")
    ids = tour.ids("ice-tour")
    expect(200 in ids and 201 not in ids, f"ice-tour after the expiry: ids {sorted(ids)}")


def step_storage(tour: Tour) -> None:
    storage = tour.api("GET", f"catalogs/{CATALOG}/storage")
    branches = {entry["branch"] for entry in storage.get("branches", [])}
    expect({"main", "ice-tour", "cleanup"} <= branches, f"storage per branch lists {sorted(branches)}")


def step_merge_queue(tour: Tour) -> None:
    """The demo's request !1 approved by `reviewer`, queued ("Merge when ready"), merged by the queue."""
    path = f"catalogs/{CATALOG}/merge-requests/1"
    tour.api("POST", f"{path}/reviews", as_reviewer=True, json={"decision": "approve", "comment": "tour"})
    cli(tour, "mr", "queue", CATALOG, "1")
    deadline = time.monotonic() + JOB_TIMEOUT
    while (request := tour.api("GET", path))["state"] == "open":
        entry = tour.api("GET", f"{path}/queue")
        if entry.get("reason") and entry.get("position") is None and entry.get("reason") != "merged":
            raise StepFailed(f"the queue took !1 out: {entry.get('reason')}: {entry.get('message')}")
        if time.monotonic() > deadline:
            raise StepFailed(f"!1 still open {JOB_TIMEOUT:.0f} s after it was queued: {json.dumps(entry)[:500]}")
        time.sleep(1)
    expect(request["state"] == "merged", f"!1 left the queue {request['state']}")
    line = tour.api("GET", f"catalogs/{CATALOG}/branches/main/queue")
    numbers = [entry["merge_request"]["number"] for entry in line.get("recent", [])]
    expect(1 in numbers, f"main's queue does not list !1 among its recent entries: {numbers}")
    cli(tour, "mr", "queue", CATALOG, "--branch", "main")


def browse(tour: Tour, pages: list[str]) -> None:
    """A headless Chromium signed in as admin over `pages`: each answers 200 with no error page and no script
    error (a request of a page's script that fails is a console error)."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    expect(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (`make test` installs Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(base_url=tour.base)
            context.set_default_timeout(30_000)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
            page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
            page.goto("/login/")
            page.fill("#id_username", ADMIN)
            page.fill("#id_password", ADMIN_PASSWORD)
            with page.expect_navigation():
                page.click("button[type=submit]")
            expect("/login" not in page.url, f"signing in as {ADMIN} stayed on {page.url}")
            for url in pages:
                try:
                    response = page.goto(url, wait_until="load")
                except PlaywrightError as exc:
                    raise StepFailed(f"GET {url} in the browser: {exc}") from exc
                status = response.status if response else None
                title, html, text = page.title(), page.content(), page.inner_text("body")
                if status != 200:
                    raise StepFailed(f"GET {url} in the browser answered {status}:\n{first_lines(text)}")
                if title.split(" · ")[0].strip() in ERROR_PAGE_TITLES or any(m in html for m in ERROR_PAGE_MARKS):
                    raise StepFailed(f"GET {url} in the browser shows an error page ({title!r}):\n{first_lines(text)}")
                if errors:
                    raise StepFailed(f"GET {url} in the browser: {errors}")
        finally:
            browser.close()


def step_browser_review(tour: Tour) -> None:
    """The pages of steps 1 to 3 while there is something to review: the catalog, the table on fix-amounts, the
    clean diff and the conflicting one."""
    browse(tour, [
        f"/catalogs/{CATALOG}",
        f"/catalogs/{CATALOG}/browse/sales/orders?ref=fix-amounts",
        f"/catalogs/{CATALOG}/diff?from=fix-amounts&to=main",
        f"/catalogs/{CATALOG}/diff?from=cleanup&to=main",
    ])  # fmt: skip


def step_browser_after(tour: Tour) -> None:
    """The merged request, the retention page and main's merge queue."""
    browse(tour, [
        f"/catalogs/{CATALOG}/merge-requests/{tour.facts.get('mr', 1)}",
        f"/catalogs/{CATALOG}/retention",
        f"/catalogs/{CATALOG}/queue/main",
    ])  # fmt: skip


STEPS: list[tuple[str, Callable[[Tour], None]]] = [
    ("API: catalogs", step_catalogs),
    ("API: the deep health check (a Spark job)", step_deep_health),
    ("API: a branch and a tag by name", step_branch_and_tag),
    ("API: rows", step_rows),
    ("1. branch fix-amounts", step_branch),
    ("2. load: an upsert by key and its job", step_load),
    ("3. review: both diffs", step_diffs),
    ("the browser: catalog, table, both diffs", step_browser_review),
    ("4-5. merge request approved by reviewer and merged", step_merge_request),
    ("the CLI commands of the README", step_cli),
    ("the Python client", step_python_client),
    ("pyiceberg: append and delete on a branch", step_iceberg),
    ("retention: rules, preview, expiry", step_retention),
    ("storage per branch", step_storage),
    ("the merge queue", step_merge_queue),
    ("the browser: merge request, retention, queue", step_browser_after),
]


def run_steps(tour: Tour, steps=STEPS) -> None:
    """Run each step; the first that fails raises StepFailed naming it."""
    for name, step in steps:
        started = time.monotonic()
        try:
            step(tour)
        except StepFailed as exc:
            raise StepFailed(f"step {name!r} failed: {exc}") from exc
        except Exception as exc:  # a bug of the tour or an answer it could not read: still the step's failure
            detail = "".join(traceback.format_exception_only(exc)).strip()
            raise StepFailed(f"step {name!r} failed: {detail}\n{first_lines(traceback.format_exc(), 30)}") from exc
        print(f"  ok  {name} ({time.monotonic() - started:.1f} s)", flush=True)


# Starting and stopping the stack.


def health(tour: Tour, *, timeout: float, stack: subprocess.Popen | None = None) -> None:
    """GET /api/v1/health until its status is ok (it answers 503 while a part is not up yet)."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if stack is not None and stack.poll() is not None:
            raise StepFailed(f"`make run` exited with code {stack.returncode} before the server was healthy")
        try:
            response = tour.http.get("/api/v1/health")
            if response.status_code >= 500 and response.status_code != 503:
                raise StepFailed(f"GET /api/v1/health answered {response.status_code}:\n{first_lines(response.text)}")
            if response.status_code == 200 and response.json().get("status") == "ok":
                return
            last = f"{response.status_code}: {response.text[:500]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(2)
    raise StepFailed(f"GET /api/v1/health not ok within {timeout:.0f} s; last: {last}")


def printed_tokens(log: str) -> tuple[str, str]:
    """The admin's and the reviewer's API tokens from what `make run` printed (merge_app's lakeui_demo)."""
    admin = re.search(r"API:.*?Token ([0-9a-f]{40})", log)
    reviewer = re.search(r"as reviewer:.*?Token ([0-9a-f]{40})", log)
    if admin is None:
        raise StepFailed("`make run` printed no admin API token (`API: curl -H 'Authorization: Token ...'`)")
    return admin.group(1), reviewer.group(1) if reviewer else ""


def server_errors(log: str) -> list[str]:
    """The 5xx answers Django logged (`ERROR django.request: Internal Server Error: /path`): a page's script or a
    worker's request can meet one that no step reads."""
    return [line for line in log.splitlines() if re.search(r"\bERROR django\.request: ", line)]


def stack_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in STACK_ENV_DROP and not k.startswith(STACK_ENV_DROP_PREFIX)}


def clean_var() -> None:
    """Remove everything under var/ but `make test`'s folder: the demo starts from nothing."""
    if VAR.exists():
        for entry in VAR.iterdir():
            if entry.name in KEEP_IN_VAR:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def start(command: list[str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        # In a process group of its own (as a terminal's foreground job), SIGINT at its default (a shell that runs
        # this script in the background would have it ignored): the stop below is then what Ctrl-C does.
        return subprocess.Popen(command, cwd=ROOT, env=stack_env(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def stop(stack: subprocess.Popen) -> list[str]:
    """Ctrl-C: SIGINT to `make run`'s process group, SIGTERM after a grace period, SIGKILL last. What went wrong."""
    problems = []
    for sig, grace in ((signal.SIGINT, STOP_GRACE), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, 10.0)):
        if stack.poll() is not None:
            break
        if sig != signal.SIGINT:
            problems.append(f"`make run` did not stop within {STOP_GRACE:.0f} s of Ctrl-C; sent {sig.name}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stack.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            stack.wait(timeout=grace)
    return problems


def ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def processes_holding(text: str) -> dict[int, str]:
    """Processes whose command line holds `text` (pid: command line), other than this script and those that
    started it."""
    mine, found = ancestors(), {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if text in cmdline:
                found[int(proc.name)] = cmdline[:300]
    return found


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        return True
    return False


def leftovers(port: int, before: Collection[int] = ()) -> list[str]:
    """Processes whose command line holds this checkout's path (the server, the workers, the embedded database
    under var/) that were not there `before` the stack started, and anything listening on the port."""
    found = [f"pid {pid}: {line}" for pid, line in processes_holding(str(ROOT)).items() if pid not in before]
    if listening(port):
        found.append(f"something still listens on 127.0.0.1:{port}")
    return found


def refuse_busy(port: int) -> None:
    """The tour must meet the stack it starts: nothing may serve the port yet, nor an embedded database run on
    the var/ it clears (a `make run` of your own)."""
    if listening(port):
        raise StepFailed(f"something already listens on 127.0.0.1:{port}: stop it (a `make run`?) first")
    running = processes_holding(str(VAR / "postgres"))
    if running:
        lines = "\n".join(f"    pid {pid}: {line}" for pid, line in running.items())
        raise StepFailed(f"a database runs on {VAR / 'postgres'}, which the stage clears: stop it first\n{lines}")


def print_log(path: Path, head: int = 80, tail: int = 300) -> None:
    """`make run`'s output: its start (install, migrate, the demo's seeding) and its end (the workers' last words)."""
    lines = path.read_text(errors="replace").splitlines()
    print(f"\n--- {path} ({len(lines)} lines) ---", file=sys.stderr)
    if len(lines) > head + tail:
        lines = [*lines[:head], f"... ({len(lines) - head - tail} lines left out) ...", *lines[-tail:]]
    print("\n".join(lines), file=sys.stderr)


def begin(args: argparse.Namespace, port: int, log_path: Path | None, stacks: list) -> Tour:
    """Start the stack (unless --no-start; its process goes into `stacks` at once, to be stopped whatever happens
    next), wait for health, and read the tokens it printed: the tour's session."""
    if not args.no_start:
        refuse_busy(port)
        clean_var()
        print(f"README tour: `{args.command}` with no LakeUI environment, output in {log_path}", flush=True)
        stacks.append(start(shlex.split(args.command), log_path))
    WORK.mkdir(parents=True, exist_ok=True)
    tour = Tour(args.base_url)
    try:
        health(tour, timeout=START_TIMEOUT, stack=stacks[0] if stacks else None)
        if args.token:
            tour.token, tour.reviewer_token = args.token, args.reviewer_token or ""
        else:
            printed = log_path.read_text(errors="replace") if log_path and log_path.exists() else ""
            tour.token, tour.reviewer_token = printed_tokens(printed)
        if not tour.reviewer_token:
            raise StepFailed("no reviewer token: `make run` printed none (`as reviewer: -H 'Authorization: ...'`)")
    except BaseException:
        tour.http.close()
        raise
    return tour


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server (make run's by default)")
    parser.add_argument("--no-start", action="store_true", help="use a stack already running at --base-url")
    parser.add_argument("--log", type=Path, help="with --no-start: the running stack's output, for the tokens")
    parser.add_argument("--token", help="with --no-start: the admin's API token (instead of --log)")
    parser.add_argument("--reviewer-token", help="with --no-start: the reviewer's API token (instead of --log)")
    parser.add_argument("--command", default="make run", help="what starts the stack (default: make run)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    port = urlparse(args.base_url).port or 80
    log_path = WORK / "make-run.log" if not args.no_start else args.log
    stacks: list[subprocess.Popen] = []
    before = set(processes_holding(str(ROOT)))  # what ran before the stack: a shell or an editor in the checkout
    tour = None
    problems: list[str] = []
    try:
        try:
            tour = begin(args, port, log_path, stacks)
        except StepFailed as exc:
            raise StepFailed(f"step 'start and health' failed: {exc}") from exc
        print(f"  ok  healthy after {time.monotonic() - started:.0f} s", flush=True)
        logged_before = log_path.stat().st_size if log_path and log_path.exists() else 0
        run_steps(tour)
        if log_path and log_path.exists():
            with open(log_path, "rb") as log:
                log.seek(logged_before)
                errors = server_errors(log.read().decode(errors="replace"))
            if errors:
                raise StepFailed("the server logged answers of 500 or more during the tour, which no step saw:\n"
                                 + first_lines("\n".join(errors), 20))  # fmt: skip
    except StepFailed as exc:
        problems.append(str(exc))
    except KeyboardInterrupt:
        problems.append("interrupted")
    finally:
        if tour is not None:
            tour.http.close()
        for stack in stacks:
            stopping = time.monotonic()
            problems += stop(stack)
            deadline = time.monotonic() + LEFTOVER_WAIT
            while (left := leftovers(port, before)) and time.monotonic() < deadline:
                time.sleep(1)
            if left:
                problems.append("still running after the stack stopped:\n" + "\n".join(f"    {p}" for p in left))
            else:
                print(f"  ok  stopped in {time.monotonic() - stopping:.0f} s, nothing left running", flush=True)
    took = time.monotonic() - started
    if problems:
        print(f"\nREADME tour FAILED after {took:.0f} s:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        if stacks and log_path.exists():
            print_log(log_path)
        return 1
    print(f"README tour passed in {took:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
