"""Where webhooks may send (hooks_app/services/targets.py): the URL's form, the allowed hosts, and the addresses a
host resolves to. Literal addresses and `localhost` only: no test here needs outside DNS."""

import pytest
from django.test import override_settings

from hooks_app.services.targets import target_check
from lakeui.errors import ApplicationError

ANY = ["*"]


def _refused(url: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as refused:
        target_check(url)
    return refused.value


@override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=ANY)
@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),  # the cloud metadata address
        ("http://[fd00:ec2::254]/", "private"),  # its IPv6 form
        ("http://100.100.100.200/", "non-public"),  # another cloud's metadata address (shared address space)
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),  # IPv4-mapped
        ("http://10.1.2.3/hook", "private"),
        ("http://192.168.0.7/hook", "private"),
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://224.0.0.1/hook", "multicast"),
        ("http://localhost:9000/hook", "loopback"),
    ],
)
def test_private_and_metadata_addresses_are_refused_by_default(url, what):
    refused = _refused(url)
    assert refused.code == "webhook_target_refused"
    assert f"({what} address)" in refused.message


@override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=ANY)
def test_a_public_address_is_allowed_and_kept_for_the_connection():
    target = target_check("https://8.8.8.8/hooks/lakeui?x=1")
    assert (target.scheme, target.host, target.port, target.path, target.addresses) == (
        "https", "8.8.8.8", 443, "/hooks/lakeui?x=1", ("8.8.8.8",)
    )  # fmt: skip


@override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=["*", "10.0.0.0/8", "127.0.0.1"])
def test_listed_addresses_and_networks_are_allowed_and_nothing_else():
    assert target_check("http://10.1.2.3:8443/hook").addresses == ("10.1.2.3",)
    assert target_check("http://127.0.0.1/hook").addresses == ("127.0.0.1",)
    assert "(loopback address)" in _refused("http://127.0.0.2/hook").message
    assert "(link-local address)" in _refused("http://169.254.169.254/").message


@override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=["ci.example.com", "*.hooks.example.org", "10.0.0.5"])
def test_only_listed_names_when_the_list_has_no_star():
    for url in ("http://other.example.com/", "http://example.org/", "http://8.8.8.8/"):
        refused = _refused(url)
        assert "not one of the hosts" in refused.message, url
    assert target_check("http://10.0.0.5/").addresses == ("10.0.0.5",)  # an address entry is also a host entry


@override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=["localhost"])
def test_listing_a_name_does_not_unlock_its_private_addresses():
    """So a name an admin allowed cannot be pointed at an internal address later (DNS rebinding)."""
    assert "(loopback address)" in _refused("http://localhost/hook").message


@pytest.mark.parametrize(
    "url",
    [
        "ftp://8.8.8.8/x",
        "file:///etc/passwd",
        "http:///nohost",
        "http://user:pass@8.8.8.8/",
        "8.8.8.8/hook",
        "http://8.8.8.8:99999/",
        "http://8.8.8.8/a b",
        "http://8.8.8.8/" + "x" * 2000,
    ],
)
def test_malformed_urls_are_refused(url):
    assert _refused(url).code == "webhook_url_invalid"
