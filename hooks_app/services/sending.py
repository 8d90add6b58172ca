"""One HTTP POST to a checked target, connecting only to the addresses that were checked (services/targets.py).

http.client rather than a higher-level client: it follows no redirect (a 3xx is an answer, not a new target that
would escape the check) and lets the connection go to a given address while the Host header and TLS name and
certificate check stay the URL's host.
"""

import http.client
import socket
import ssl

from hooks_app.services.targets import Target

RESPONSE_EXCERPT = 512  # bytes of the answer kept with the attempt


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, target: Target, address: str, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, target: Target, address: str, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(*, target: Target, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, str]:
    """POST `body` to the target's first reachable checked address: (HTTP status, the answer's first bytes).
    Raises OSError (refused, timed out, TLS) or http.client.HTTPException (a broken answer)."""
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    error: OSError | None = None
    for address in target.addresses:
        connection = kind(target, address, timeout)
        try:
            connection.connect()
        except OSError as exc:
            connection.close()
            error = exc
            continue
        try:
            connection.request("POST", target.path, body=body, headers=headers)
            response = connection.getresponse()
            excerpt = response.read(RESPONSE_EXCERPT).decode("utf-8", errors="replace")
            return response.status, excerpt.replace("\x00", "")  # PostgreSQL keeps no NUL in JSON
        finally:
            connection.close()
    raise error or OSError("no address to connect to")
