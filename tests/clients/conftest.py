"""The client's tests talk to a live server as the test's user, through their API token."""

import pytest
from lakeui_client import Client
from rest_framework.authtoken.models import Token


@pytest.fixture
def token(user):
    return Token.objects.get_or_create(user=user)[0].key


@pytest.fixture
def client(live_server, token):
    with Client(url=live_server.url, token=token) as with_client:
        yield with_client
