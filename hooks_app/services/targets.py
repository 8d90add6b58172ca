"""Where a webhook may send: the URL's form, its host against LAKEUI_WEBHOOK_ALLOWED_HOSTS, and every address the
host resolves to (no loopback, private, link-local/metadata, multicast or reserved address unless listed).

Checked when a webhook is saved and again before each attempt, and the attempt connects to the very addresses that
were checked (`Target.addresses`), never resolving the name a second time: a name that resolves to a public address
when it is checked and to 169.254.169.254 a moment later (DNS rebinding) reaches nothing it should not.
"""

import fnmatch
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from lakeui.errors import ApplicationError

MAX_URL = 2000
MESSAGE_URL = "A webhook URL is an absolute http:// or https:// URL with a host and no user name or password."
MESSAGE_HOST = "The host {host!r} is not one of the hosts webhooks may send to (LAKEUI_WEBHOOK_ALLOWED_HOSTS)."
MESSAGE_ADDRESS = (
    "The host {host!r} resolves to {address} ({what} address), where webhooks may not send unless an admin lists it"
    " in LAKEUI_WEBHOOK_ALLOWED_HOSTS."
)
MESSAGE_UNRESOLVED = "The host {host!r} does not resolve to any address."

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query
    addresses: tuple[str, ...]  # the checked addresses to connect to, in the resolver's order


def _refused(message: str, **details) -> ApplicationError:
    return ApplicationError("webhook_target_refused", message, details=details or None)


def _network(entry: str) -> Network | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return None


def _allowed() -> tuple[list[str], list[Network]]:
    names, networks = [], []
    for entry in settings.LAKEUI_WEBHOOK_ALLOWED_HOSTS:
        network = _network(entry)
        if network is not None:
            networks.append(network)
        else:
            names.append(entry.lower().rstrip("."))
    return names, networks


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _unsafe(address: Address) -> str | None:
    """What makes `address` one webhooks may not reach by default, or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _unsafe(address.ipv4_mapped)
    for what in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{what}"):
            return what.replace("_", "-")
    return None if address.is_global else "non-public"


def url_parse(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of a well-formed webhook URL; 400 `webhook_url_invalid` otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts = port = None
    if (
        parts is None
        or len(url) > MAX_URL
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or any(c.isspace() for c in url)
    ):
        raise ApplicationError("webhook_url_invalid", MESSAGE_URL, details={"field": "url"})
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname.lower().rstrip("."), port or (443 if parts.scheme == "https" else 80), path


def target_check(url: str) -> Target:
    """The target of `url` if webhooks may send there now (resolving its host); 400 `webhook_target_refused` (or
    `webhook_url_invalid`) if not."""
    scheme, host, port, path = url_parse(url)
    names, networks = _allowed()
    literal = _literal(host)
    named = any(fnmatch.fnmatchcase(host, name) for name in names)
    if not named and not (literal is not None and any(literal in network for network in networks)):
        raise _refused(MESSAGE_HOST.format(host=host), host=host)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        found = []
    addresses = tuple(dict.fromkeys(info[4][0] for info in found))
    if not addresses:
        raise _refused(MESSAGE_UNRESOLVED.format(host=host), host=host)
    for text in addresses:
        address = ipaddress.ip_address(text.split("%")[0])
        what = _unsafe(address)
        if what is not None and not any(address in network for network in networks):
            raise _refused(MESSAGE_ADDRESS.format(host=host, address=address, what=what), host=host, address=text)
    return Target(scheme=scheme, host=host, port=port, path=path, addresses=addresses)
