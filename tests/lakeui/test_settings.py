import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from lakeui.settings.env import celery_broker_config, database_config, warehouse_location

VAR = Path("/srv/lakeui/var")


def test_database_url_selects_postgresql():
    config = database_config({"DATABASE_URL": "postgres://lake:secret@db.example:5433/lakeui"}, VAR)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["HOST"], config["PORT"]) == ("lakeui", "lake", "db.example", 5433)


def test_no_database_url_selects_sqlite_under_var():
    config = database_config({}, VAR)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(VAR / "lakeui.sqlite3")
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_unsupported_database_is_refused():
    with pytest.raises(ImproperlyConfigured):
        database_config({"DATABASE_URL": "mysql://root@localhost/lakeui"}, VAR)


def test_redis_url_selects_redis_broker_and_backend():
    config = celery_broker_config({"REDIS_URL": "redis://127.0.0.1:6379/3"}, VAR, visibility_timeout=100)
    assert config["broker_url"] == config["result_backend"] == "redis://127.0.0.1:6379/3"
    assert config["broker_transport_options"]["visibility_timeout"] == 100


def test_no_redis_url_selects_filesystem_transport_under_var():
    config = celery_broker_config({}, VAR, visibility_timeout=100)
    assert config["broker_url"] == "filesystem://"
    assert config["broker_transport_options"]["data_folder_in"].startswith(str(VAR))
    assert config["result_backend"].startswith(f"file://{VAR}")
    assert config["broker_transport"] == "lakeui.broker:Transport"


def test_the_embedded_broker_never_shows_a_consumer_a_half_written_message(tmp_path, monkeypatch):
    """A message file gets its queue name (the one consumers look for) only once it is whole: kombu's own
    filesystem transport creates the file first, and a consumer that takes it then fails to decode it."""
    import json
    import os

    from kombu import Connection

    from lakeui import broker

    renames = []

    def replace(partial, final):
        renames.append((os.path.exists(final), json.loads(Path(partial).read_bytes())["body"] is not None))
        os.rename(partial, final)

    monkeypatch.setattr(broker.os, "replace", replace)
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "store_processed": False,
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    with Connection("filesystem://", transport="lakeui.broker:Transport", transport_options=options) as connection:
        queue = connection.SimpleQueue("q")
        queue.put({"n": 1})
        assert renames == [(False, True)]  # renamed into a name that did not exist, with the whole message
        assert queue.get(timeout=1).payload == {"n": 1}
        queue.close()


def test_warehouse_is_absolute_or_a_uri():
    assert warehouse_location({}, Path("/app")) == "/app/var/warehouse"
    assert warehouse_location({"LAKEUI_WAREHOUSE": "s3a://bucket/wh"}, Path("/app")) == "s3a://bucket/wh"


def test_running_settings_follow_this_machines_environment():
    expected_vendor = "postgresql" if os.environ.get("DATABASE_URL") else "sqlite"
    assert connection.vendor == expected_vendor
    expected_broker = os.environ.get("REDIS_URL") or "filesystem://"
    assert expected_broker == settings.CELERY_BROKER_URL
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        # CI must exercise the production parts, not the embedded defaults.
        assert connection.vendor == "postgresql"
        assert settings.CELERY_BROKER_URL.startswith("redis://")


def test_celery_is_set_up_for_long_jobs():
    from lakeui.celery import app

    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_soft_time_limit < conf.task_time_limit < settings.CELERY_BROKER_VISIBILITY_TIMEOUT
    if conf.broker_url.startswith("redis"):
        assert conf.broker_transport_options["visibility_timeout"] == settings.CELERY_BROKER_VISIBILITY_TIMEOUT


def test_production_settings_pass_check_deploy(tmp_path):
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="lakeui.settings.production",
        SECRET_KEY="x7#kP2q!vR9mZ4t@Lw8yN3b$Hc6fJ1s%Ue5gQ0aD^oXi&Kr*Vz",
        ALLOWED_HOSTS="lakeui.example.com",
        LAKEUI_VAR_DIR=str(tmp_path),
    )
    env.pop("DEBUG", None)
    run = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no issues" in run.stdout


def test_production_settings_require_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY",)}
    env.update(DJANGO_SETTINGS_MODULE="lakeui.settings.production", ALLOWED_HOSTS="x", LAKEUI_VAR_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "SECRET_KEY must be set" in run.stderr
