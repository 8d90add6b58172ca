"""The web server as `manage.py serve` and the Docker image start it (lakeui/gunicorn_conf.py), and the switches
of the read path in the environment."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **environment: str) -> str:
    env = {key: value for key, value in os.environ.items() if key not in ("WEB_CONCURRENCY", "LAKEUI_WEB_THREADS")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**env, **environment}, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_gunicorn_is_sized_from_the_cores_unless_the_environment_says():
    code = "import json; from lakeui import gunicorn_conf as c; print(json.dumps([c.workers, c.threads, c.reuse_port]))"
    cores = len(os.sched_getaffinity(0))
    assert json.loads(_python(code)) == [max(2, cores), 4, True]
    sized = _python(code, WEB_CONCURRENCY="5", LAKEUI_WEB_THREADS="3", LAKEUI_WEB_REUSE_PORT="false")
    assert json.loads(sized) == [5, 3, False]


def test_the_cached_read_path_can_be_turned_off_and_the_worker_header_on():
    code = "import json; from lakeui.settings import base; print(json.dumps(base.MIDDLEWARE))"
    default = json.loads(_python(code))
    assert default[-1] == "catalog_app.middleware.CachedReadMiddleware"
    assert "lakeui.middleware.WorkerHeaderMiddleware" not in default
    changed = json.loads(_python(code, LAKEUI_CACHED_READS="0", LAKEUI_WORKER_HEADER="1"))
    assert "catalog_app.middleware.CachedReadMiddleware" not in changed
    assert changed[0] == "lakeui.middleware.WorkerHeaderMiddleware"


def _answering_worker(port: int) -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /api/v1/catalogs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower().split("\r\n")
    worker = next(line.split(":", 1)[1].strip() for line in head if line.startswith("lakeui-worker:"))
    return int(head[0].split()[1]), worker


def _listening_sockets(port: int) -> int:
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(1 for row in rows if row[3] == "0A" and int(row[1].split(":")[1], 16) == port)  # 0A: LISTEN


def test_the_configured_server_answers_on_every_worker_through_its_own_socket():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "gunicorn", "lakeui.wsgi", "--config", "python:lakeui.gunicorn_conf",
               "--bind", f"127.0.0.1:{port}", "--workers", "2", "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "LAKEUI_WORKER_HEADER": "1", "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1"}
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        seen, deadline = set(), time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            try:
                status, worker = _answering_worker(port)
            except OSError:
                time.sleep(0.2)
                continue
            assert status == 401  # no token: refused, as by any server
            seen.add(worker)
        assert len(seen) == 2  # both workers answer
        assert _listening_sockets(port) == 2  # each on its own socket (SO_REUSEPORT), the kernel spreading clients
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
