"""gunicorn's configuration for the web process: `gunicorn lakeui.wsgi --config python:lakeui.gunicorn_conf`, as
`manage.py serve` (`make run`) and the Docker image start it. Options on the command line win over these; the
environment sizes it (WEB_CONCURRENCY workers, LAKEUI_WEB_THREADS threads each, LAKEUI_WEB_REUSE_PORT).

Sized for many keep-alive clients on few cores (benchmarks/api_reads.py: 50 clients on 2 cores,
docs/benchmarks.md#api-reads):

- gthread workers: a kept-alive connection waits in the worker's poller, not in a thread, and a thread is free
  for the next request while another waits on the database or on a data read's job.
- One process per core (at least two): a process runs Python on one core at a time (the GIL) and a read is
  mostly Python. On 2 cores, 2 workers served 436 requests/s at p99 276 ms, 3 workers 371-416 at 349-369 ms
  (medians of 5 alternating runs on the shared machine). Four threads each: as fast as two, and room for reads
  that wait (a page of rows waits on the interactive worker).
- reuse_port: each worker listens on its own socket (SO_REUSEPORT) and the kernel spreads new connections over
  them. With one shared socket, whichever worker wakes first accepts a burst of connections, and with keep-alive
  it keeps them: 29-50 of 50 benchmark clients ended on one worker, which then served most requests on one core.
- Errors gunicorn answers itself, before the application sees the request (a request line or headers over its
  limits, a malformed request), are JSON `{code, message, details}` as every API error, not its HTML page; the
  request line may be as long as gunicorn allows (8190 bytes), so URLs of 4 to 8 KB reach the application.
"""

import json
import os

from gunicorn import util as _gunicorn_util


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may run on (a container's cpuset)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value in ("1", "true", "yes", "on")


worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or max(2, _cores()))
threads = int(os.environ.get("LAKEUI_WEB_THREADS") or 4)
reuse_port = _flag("LAKEUI_WEB_REUSE_PORT", True)
timeout = 180  # a data read the web process waits for (the interactive worker's Spark job) may take long
limit_request_line = 8190  # gunicorn's largest (its default is 4094)

# gunicorn's own answers (workers/base.py handle_error) as the API's errors: status -> code.
GUNICORN_ERROR_CODES = {
    400: "bad_request", 403: "forbidden", 414: "uri_too_long", 417: "expectation_failed",
    431: "headers_too_large", 500: "internal_error", 501: "not_implemented",
}  # fmt: skip
MESSAGE_URI_TOO_LONG = (
    "The request line (method and URL) is longer than the {limit} bytes this server accepts; send long inputs in "
    "the request body."
)


def json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's `util.write_error`, answering JSON: the request may not have been read (a request line too long),
    so the body is the API's error shape whatever the path."""
    message = MESSAGE_URI_TOO_LONG.format(limit=limit_request_line) if status_int == 414 else mesg or reason
    code = GUNICORN_ERROR_CODES.get(status_int, "bad_request")
    body = json.dumps({"code": code, "message": message, "details": None}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    _gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


_gunicorn_util.write_error = json_error  # the workers fork from this process and call util.write_error
