"""A real HTTP server on loopback that plays a webhook's target: it keeps every request it gets and answers each with
the next of a scripted list of statuses (then 200), optionally after a delay."""

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    answers: list[int] = field(default_factory=list)  # statuses for the first requests; 200 after them
    delays: list[float] = field(default_factory=list)  # seconds to wait before answering the first requests
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    n = len(receiver.received)
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if n < len(receiver.delays):
                    time.sleep(receiver.delays[n])
                status = receiver.answers[n] if n < len(receiver.answers) else 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    self.wfile.write(f"answer {n + 1}: {status}".encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up waiting (a timeout test)

            def log_message(self, *args) -> None:
                pass

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> "Receiver":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)
