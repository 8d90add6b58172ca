import uuid

import pytest

pytestmark = pytest.mark.django_db


def test_unknown_job_is_a_json_404(user_client):
    response = user_client.get(f"/api/v1/jobs/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["code"] == "job_not_found"
    assert set(response.json()) == {"code", "message", "details"}


def test_unknown_api_path_is_a_json_404(user_client):
    response = user_client.get("/api/v1/no/such/thing")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "Not found.", "details": None}


def test_bad_query_is_a_400_with_field_details(user_client):
    response = user_client.get("/api/v1/jobs?status=bogus")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    assert "status" in body["details"]


def test_bad_health_timeout_is_a_400(user_client):
    response = user_client.get("/api/v1/health/deep?timeout=60")  # the deep check waits at most 5 s
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "timeout" in response.json()["details"]


def test_anonymous_api_call_is_a_401(api_client):
    response = api_client.get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_token_authentication(api_client, user):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=user)
    response = api_client.get("/api/v1/jobs", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    bad = api_client.get("/api/v1/jobs", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert bad.status_code == 401
    assert bad.json()["code"] == "authentication_failed"


def test_session_authentication(api_client, user):
    assert api_client.login(username="alice", password="alice-password")
    assert api_client.get("/api/v1/jobs").status_code == 200


def test_openapi_schema_and_docs(api_client, user_client):
    assert api_client.get("/api/v1/schema").status_code == 401  # anonymous users get nothing but health
    schema = user_client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/health", "/api/v1/jobs", "/api/v1/jobs/{job_id}"} <= set(paths)
    assert "/api/v1/catalogs/{catalog}/merge-requests/{number}/reviews" in paths
    docs = user_client.get("/api/docs")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
