"""Fixtures of the merge tests."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient


@pytest.fixture
def clients(user):
    """API clients of the merge queue's people: alice (admin: she creates the catalog), bob (editor, the requests'
    author), carol (approver, also CI), dave (editor)."""
    answer = {}
    for name in ("alice", "bob", "carol", "dave"):
        person = user if name == "alice" else get_user_model().objects.create_user(name)
        answer[name] = APIClient()
        answer[name].force_authenticate(person)
    return answer
