"""Every error is JSON in the caller's protocol (issue 41): a URL over gunicorn's request-line limit gets the API's
JSON 414 (not gunicorn's HTML page), URLs of 4 to 8 KB reach the application, and a NUL in an Iceberg path gets
Iceberg's error body."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.lakeui.test_serving import ROOT

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/iceberg/lake/ma%00in/v1/config", {"error": {"type": "BadRequestException", "code": 400}}),
        ("/iceberg/lake/main/v1/namespaces/sa%00les", {"error": {"type": "BadRequestException", "code": 400}}),
        ("/api/v1/catalogs/la%00ke", {"code": "invalid_input", "details": None}),
    ],
)
def test_a_nul_in_the_path_is_refused_in_the_callers_protocol(client, path, body):
    response = client.get(path)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    answer = response.json()
    message = answer["error"].pop("message") if "error" in answer else answer.pop("message")
    assert message, answer
    assert answer == body


def _ask(port: int, target: str) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def test_the_served_app_answers_long_urls_and_refuses_too_long_ones_as_json():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "gunicorn", "lakeui.wsgi", "--config", "python:lakeui.gunicorn_conf",
               "--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1"}
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _ask(port, "/api/v1/catalogs")
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        status, headers, body = _ask(port, "/api/v1/catalogs?name=" + "x" * 6000)  # past gunicorn's default 4094
        assert status == 401 and headers["content-type"] == "application/json", body[:300]  # the app answered
        status, headers, body = _ask(port, "/api/v1/catalogs?name=" + "x" * 9000)
        assert status == 414 and headers["content-type"] == "application/json", body[:300]
        answer = json.loads(body)
        assert answer["code"] == "uri_too_long" and "8190 bytes" in answer["message"] and answer["details"] is None
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
