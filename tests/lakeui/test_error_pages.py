"""With DEBUG off (as `make run` serves) an error no view turned into its protocol's answer still leaves in that
protocol's shape: the API's JSON, the Iceberg catalog's JSON, the UI's page; never a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parent.parent.parent


class FailingMiddleware:
    """Fails every request that asks it to, before any view runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.headers.get("X-Fail"):
            raise RuntimeError("a middleware failed")
        return self.get_response(request)


@pytest.fixture
def failing_client():
    middleware = [*settings.MIDDLEWARE, f"{__name__}.FailingMiddleware"]
    with override_settings(MIDDLEWARE=middleware, DEBUG=False):
        yield Client(raise_request_exception=False, HTTP_X_FAIL="1")


@pytest.mark.django_db
def test_an_api_error_outside_a_view_is_the_apis_json(failing_client):
    response = failing_client.get("/api/v1/catalogs")
    assert response.status_code == 500
    assert response.json() == {
        "code": "internal_error",
        "message": "An unexpected error occurred; it has been logged.",
        "details": None,
    }


@pytest.mark.django_db
def test_an_iceberg_error_outside_a_view_is_the_iceberg_protocols_json(failing_client):
    response = failing_client.get("/iceberg/demo/main/v1/config")
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "ServiceFailureException"
    assert response.json()["error"]["code"] == 500


@pytest.mark.django_db
def test_a_page_error_is_the_uis_page_without_a_traceback(failing_client):
    response = failing_client.get("/catalogs/")
    assert response.status_code == 500
    text = response.content.decode()
    assert "Something went wrong" in text
    assert "Traceback" not in text and "a middleware failed" not in text


@pytest.mark.django_db
def test_a_missing_page_is_the_uis_404_without_django_debug_page(client, settings):
    settings.DEBUG = False
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert "There is no page at this address" in response.content.decode()


def test_make_runs_settings_serve_with_debug_off_and_make_dev_turns_it_on():
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="lakeui.settings.local", DATABASE_URL="postgres://u@127.0.0.1/x")
    env.pop("DEBUG", None)
    plain = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    debug = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**env, "DEBUG": "true"}, capture_output=True, text=True
    )
    assert (plain.stdout.strip(), debug.stdout.strip()) == ("False", "True"), plain.stderr + debug.stderr
