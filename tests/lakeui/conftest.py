"""The catalog the read tests read (tests/lakeui/test_read_cost.py, test_cached_reads.py)."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

API = "/api/v1/catalogs"
BASE, MAIN = f"{API}/lake", f"{API}/lake/refs/main"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def reader(user_client):
    """A catalog with a database of five tables, a branch and a tag, and bob, who may view it (by token)."""
    assert user_client.post(API, {"name": "lake"}, format="json").status_code == 201
    assert user_client.post(f"{MAIN}/databases", {"name": "db"}, format="json").status_code == 201
    for index in range(5):
        table = {"name": f"t{index}", "columns": [{"name": "id", "type": "long"}]}
        assert user_client.post(f"{MAIN}/databases/db/tables", table, format="json").status_code == 201
    assert user_client.post(f"{BASE}/branches", {"name": "dev", "source": "main"}, format="json").status_code == 201
    assert user_client.post(f"{BASE}/tags", {"name": "v1", "ref": "main"}, format="json").status_code == 201
    bob = get_user_model().objects.create_user("bob")
    assert user_client.post(f"{BASE}/roles", {"user": "bob", "role": "viewer"}, format="json").status_code == 201
    return token_client(bob)
