"""CI's README stage (.ci/readme_tour.py) fails when a step answers 5xx, naming the step, the request and the body;
it reads the tokens `make run` prints; its check for what the stack left running finds a process and a listener.

The tour itself runs in CI against `make run` (`.ci/run`); here its request layer runs against a small HTTP
server that answers what each test tells it to."""

import importlib.util
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.http import HttpResponse, HttpResponseServerError
from django.test import RequestFactory
from django.utils.log import log_response
from rest_framework.authtoken.models import Token

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "readme_tour.py"
ADMIN_TOKEN, REVIEWER_TOKEN = "a" * 40, "b" * 40
TRACEBACK = "Traceback (most recent call last):\n  File token_reads.py\nTypeError: not all arguments converted"


def _load_tour():
    spec = importlib.util.spec_from_file_location("readme_tour", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tour_script = _load_tour()


class FakeLakeUI:
    """A server answering `routes[(method, path)] = (status, body)`; anything else 404. It records each request
    with its Authorization header."""

    def __init__(self, routes: dict) -> None:
        self.routes, self.seen = routes, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?")[0]
                fake.seen.append((self.command, path, self.headers.get("Authorization")))
                status, body = fake.routes.get((self.command, path), (404, {"code": "not_found"}))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    servers = []

    def make(routes):
        servers.append(FakeLakeUI(routes))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


HEALTHY = {
    ("GET", "/api/v1/health"): (200, {"status": "ok"}),
    ("GET", "/api/v1/health/deep"): (200, {"status": "ok", "parts": {"spark": {"status": "ok"}}}),
}


def test_a_5xx_ends_the_stage_with_exit_1_naming_the_step_the_request_and_the_body(fake):
    server = fake({
        **HEALTHY,
        ("GET", "/api/v1/catalogs"): (200, {"results": [{"name": "demo"}]}),
        ("GET", "/api/v1/catalogs/demo/branches/main"): (500, TRACEBACK),
    })  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--no-start", "--base-url", server.url, "--token", ADMIN_TOKEN,
         "--reviewer-token", REVIEWER_TOKEN],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ok  API: catalogs" in done.stdout
    assert "README tour FAILED" in done.stderr
    assert "step 'API: a branch and a tag by name' failed" in done.stderr
    assert "GET /api/v1/catalogs/demo/branches/main answered 500" in done.stderr
    assert "TypeError: not all arguments converted" in done.stderr
    # Nothing after the failed step ran, and the steps used the admin's token.
    assert [path for _, path, _ in server.seen][-1] == "/api/v1/catalogs/demo/branches/main"
    assert {auth for method, path, auth in server.seen if path != "/api/v1/health"} == {f"Token {ADMIN_TOKEN}"}


def test_a_5xx_while_following_a_job_fails_its_step(fake, tmp_path):
    server = fake({
        ("POST", "/api/v1/catalogs/demo/refs/fix-amounts/databases/sales/tables/orders/load"): (202, {"id": "j1"}),
        ("GET", "/api/v1/jobs/j1"): (502, "<h1>Bad Gateway</h1>\nthe worker's proxy"),
    })  # fmt: skip
    tour = tour_script.Tour(server.url, token=ADMIN_TOKEN, work=tmp_path)
    with pytest.raises(tour_script.StepFailed) as failed:
        tour_script.run_steps(tour, [("2. load", tour_script.step_load)])
    message = str(failed.value)
    assert message.startswith("step '2. load' failed: GET /api/v1/jobs/j1 answered 502")
    assert "Bad Gateway" in message and "the worker's proxy" in message


def test_a_step_whose_answer_is_wrong_fails_with_what_it_got(fake, tmp_path):
    server = fake({("GET", "/api/v1/catalogs"): (200, {"results": [{"name": "other"}]})})
    tour = tour_script.Tour(server.url, token=ADMIN_TOKEN, work=tmp_path)
    with pytest.raises(tour_script.StepFailed, match=r"step 'catalogs' failed: .*\['other'\]"):
        tour_script.run_steps(tour, [("catalogs", tour_script.step_catalogs)])


def test_health_that_never_gets_ok_fails_the_start(fake, tmp_path, monkeypatch):
    server = fake({("GET", "/api/v1/health"): (503, {"status": "error", "parts": {"worker": "unavailable"}})})
    monkeypatch.setattr(tour_script.time, "sleep", lambda seconds: None)
    with pytest.raises(tour_script.StepFailed, match=r"not ok within 0 s; last: 503: .*unavailable"):
        tour_script.health(tour_script.Tour(server.url, work=tmp_path), timeout=0.2)


@pytest.mark.django_db
def test_the_tokens_make_run_prints_are_read(capsys):
    call_command("lakeui_demo", "--no-catalog")
    printed = capsys.readouterr().out
    admin, reviewer = tour_script.printed_tokens(printed)
    assert admin == Token.objects.get(user__username="admin").key
    assert reviewer == Token.objects.get(user__username="reviewer").key


def _sleeper(path: Path) -> subprocess.Popen:
    """A process whose command line names `path`, once the kernel shows that command line."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(path)])
    deadline = time.monotonic() + 10
    while str(path) not in Path(f"/proc/{process.pid}/cmdline").read_bytes().decode(errors="replace"):
        assert time.monotonic() < deadline, "the sleeper never showed its command line"
        time.sleep(0.05)
    return process


def test_what_the_stack_leaves_running_is_found():
    left = _sleeper(ROOT / "var" / "pg")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        found = tour_script.leftovers(port)
        assert any(line.startswith(f"pid {left.pid}: ") for line in found), found
        assert f"something still listens on 127.0.0.1:{port}" in found
    finally:
        left.kill()
        left.wait()
        listener.close()
    found = tour_script.leftovers(port)
    assert not any(line.startswith(f"pid {left.pid}: ") for line in found)
    assert f"something still listens on 127.0.0.1:{port}" not in found


def test_what_ran_before_the_stack_is_not_counted_as_left_by_it():
    running = _sleeper(ROOT / "notes.txt")
    try:
        before = set(tour_script.processes_holding(str(ROOT)))
        assert running.pid in before
        assert not any(line.startswith(f"pid {running.pid}: ") for line in tour_script.leftovers(1, before))
    finally:
        running.kill()
        running.wait()


def test_a_5xx_the_server_logs_is_found_in_its_output_and_a_4xx_is_not():
    """Django's request logger, with the stack's log format (settings.LOGGING): what `make run` prints."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"]))
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    try:
        factory = RequestFactory()
        log_response("Not Found: %s", factory.get("/api/v1/catalogs/nope").path,
                     response=HttpResponse(status=404), request=factory.get("/api/v1/catalogs/nope"))  # fmt: skip
        log_response("%s: %s", "Internal Server Error", "/catalogs/demo/storage",
                     response=HttpResponseServerError(), request=factory.get("/catalogs/demo/storage"))  # fmt: skip
    finally:
        logger.removeHandler(handler)
    errors = tour_script.server_errors(stream.getvalue())
    assert len(errors) == 1 and errors[0].endswith("Internal Server Error: /catalogs/demo/storage"), errors


def test_the_stage_refuses_to_start_over_a_busy_port():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        with pytest.raises(tour_script.StepFailed, match="already listens"):
            tour_script.refuse_busy(listener.getsockname()[1])
    finally:
        listener.close()


def test_make_run_inherits_no_variable_of_docs_configuration(monkeypatch):
    """The stage starts `make run` with none of LakeUI's configuration set, whatever CI exports (DATABASE_URL and
    REDIS_URL for the suite): every variable docs/configuration.md lists, but the machine's own two."""
    doc = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", doc, flags=re.M)) - {"SPARK_LOCAL_IP", "XDG_CONFIG_HOME"}
    assert {"DATABASE_URL", "REDIS_URL", "DEBUG", "LAKEUI_PGDATA"} <= documented
    for name in documented:
        monkeypatch.setenv(name, "set by CI")
    inherited = tour_script.stack_env()
    assert not documented & inherited.keys()
    assert inherited["PATH"] == os.environ["PATH"]
