import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from lakeui.settings.env import (
    Env,
    celery_broker_config,
    database_config,
    embedded_pgdata,
    spark_conf,
    warehouse_location,
)

VAR = Path("/srv/lakeui/var")


def test_database_url_selects_postgresql():
    config = database_config({"DATABASE_URL": "postgres://lake:secret@db.example:5433/lakeui"}, VAR)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["HOST"], config["PORT"]) == ("lakeui", "lake", "db.example", 5433)


def test_no_database_url_selects_the_embedded_postgresql_server_under_var():
    config = database_config({}, VAR)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert embedded_pgdata({}, VAR) == VAR / "postgres"
    assert embedded_pgdata({"LAKEUI_PGDATA": "/data/pg"}, VAR) == Path("/data/pg")
    assert embedded_pgdata({"DATABASE_URL": "postgres://u@h/db"}, VAR) is None


def test_a_postgresql_connection_is_kept_a_minute_and_checked_before_reuse():
    config = database_config({"DATABASE_URL": "postgresql://u:p%40ss@h/db?sslmode=require"}, VAR)
    assert (config["PASSWORD"], config["OPTIONS"]) == ("p@ss", {"sslmode": "require"})
    assert (config["CONN_MAX_AGE"], config["CONN_HEALTH_CHECKS"]) == (60, True)


def test_a_socket_folder_as_host_is_read_back_from_its_percent_encoded_form():
    config = database_config({"DATABASE_URL": "postgres://postgres@%2Fsrv%2Flake%20ui%2Fpg:5432/lakeui"}, VAR)
    assert (config["HOST"], config["PORT"]) == ("/srv/lake ui/pg", 5432)


def test_a_sqlite_url_is_refused_with_a_message_that_says_what_to_do():
    with pytest.raises(ImproperlyConfigured, match=r"PostgreSQL only .*unset DATABASE_URL"):
        database_config({"DATABASE_URL": "sqlite:////srv/lake.sqlite3"}, VAR)


def test_an_empty_database_url_is_the_embedded_default():
    assert embedded_pgdata({"DATABASE_URL": ""}, VAR) == VAR / "postgres"


def test_unsupported_database_is_refused():
    with pytest.raises(ImproperlyConfigured):
        database_config({"DATABASE_URL": "mysql://root@localhost/lakeui"}, VAR)


def test_redis_url_selects_redis_broker_and_backend():
    config = celery_broker_config({"REDIS_URL": "redis://127.0.0.1:6379/3"}, VAR, visibility_timeout=100)
    assert config["broker_url"] == config["result_backend"] == "redis://127.0.0.1:6379/3"
    assert config["broker_transport_options"]["visibility_timeout"] == 100


def test_a_redis_url_of_another_scheme_is_refused():
    assert (
        celery_broker_config({"REDIS_URL": "rediss://r:6380/1"}, VAR, visibility_timeout=1)["broker_url"]
        == "rediss://r:6380/1"
    )
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        celery_broker_config({"REDIS_URL": "amqp://guest@localhost//"}, VAR, visibility_timeout=1)


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


def test_an_empty_variable_gives_its_default():
    env = Env({"LAKEUI_MAX_ROWS": "", "DEBUG": "", "ALLOWED_HOSTS": "", "LOG_LEVEL": ""})
    assert env.int("LAKEUI_MAX_ROWS", 100_000) == 100_000
    assert env.bool("DEBUG", True) is True
    assert env.list("ALLOWED_HOSTS", default=["localhost"]) == ["localhost"]
    assert env.str("LOG_LEVEL", "INFO") == "INFO"


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                                 ("0", False), ("false", False), ("No", False), ("off", False)])  # fmt: skip
def test_booleans_are_read_strictly(value, expected):
    assert Env({"DEBUG": value}).bool("DEBUG", not expected) is expected


@pytest.mark.parametrize("value", ["ture", "2", "y", "ok"])
def test_a_boolean_that_is_not_one_refuses_to_start(value):
    """django-environ alone reads a typo as false: LAKEUI_HTTPS=ture would turn HTTPS off."""
    with pytest.raises(ImproperlyConfigured, match="LAKEUI_HTTPS must be true or false"):
        Env({"LAKEUI_HTTPS": value}).bool("LAKEUI_HTTPS", True)


def test_a_number_that_is_not_one_names_its_variable():
    with pytest.raises(ImproperlyConfigured, match="LAKEUI_MAX_ROWS"):
        Env({"LAKEUI_MAX_ROWS": "lots"}).int("LAKEUI_MAX_ROWS", 1)
    with pytest.raises(ImproperlyConfigured, match="LAKEUI_WEBHOOK_RETRY_DELAYS"):
        Env({"LAKEUI_WEBHOOK_RETRY_DELAYS": "10,soon"}).list("LAKEUI_WEBHOOK_RETRY_DELAYS", cast=float, default=[])


def test_lists_are_stripped_and_typed():
    env = Env({"ALLOWED_HOSTS": " a.example , b.example,, ", "LAKEUI_WEBHOOK_RETRY_DELAYS": "0.5, 2"})
    assert env.list("ALLOWED_HOSTS", default=[]) == ["a.example", "b.example"]
    assert env.list("LAKEUI_WEBHOOK_RETRY_DELAYS", cast=float, default=[]) == [0.5, 2.0]


def test_a_value_starting_with_a_dollar_is_kept_as_written():
    """django-environ alone reads `$NAME` as the value of the variable NAME: a secret key may start with `$`."""
    env = Env({"SECRET_KEY": "$ecret-key-with-#-and-$", "ecret-key-with-#-and-$": "other"})
    assert env.str("SECRET_KEY", "") == "$ecret-key-with-#-and-$"


def test_spark_settings_are_spark_key_value_pairs():
    assert spark_conf({"LAKEUI_SPARK_CONF": ""}, "LAKEUI_SPARK_CONF") == {}
    assert spark_conf({"X": "spark.a=1=2, spark.b="}, "X") == {"spark.a": "1=2", "spark.b": ""}
    with pytest.raises(ImproperlyConfigured, match=r"spark\.key=value"):
        spark_conf({"X": "spark.a=1,b=2"}, "X")


def _settings_in_a_subprocess(tmp_path, module: str, names: list[str], **env: str) -> dict:
    """The values `names` take in `module` under exactly `env` (plus PATH), read in a new process. A DATABASE_URL
    that is never connected to, unless `env` sets one (the empty one is none: the settings start the embedded
    server)."""
    code = f"import json, {module} as s; print(json.dumps({{n: getattr(s, n) for n in {names!r}}}, default=str))"
    unused = "postgres://settings-only@localhost/unused"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env={"PATH": os.environ["PATH"], "LAKEUI_VAR_DIR": str(tmp_path), "DATABASE_URL": unused, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


NAMES = ["DEBUG", "ALLOWED_HOSTS", "LAKEUI_MAX_ROWS", "DATA_UPLOAD_MAX_MEMORY_SIZE", "LAKEUI_JOB_STALE_AFTER",
         "LAKEUI_JOB_RECOVER_EVERY", "LAKEUI_INTERACTIVE_TIME_LIMIT", "CELERY_TASK_DEFAULT_QUEUE",
         "LAKEUI_INTERACTIVE_QUEUE", "LAKEUI_WEBHOOK_QUEUE", "LAKEUI_WEBHOOK_RETRY_DELAYS", "LAKEUI_WEBHOOK_TIMEOUT",
         "LAKEUI_WEBHOOK_ALLOWED_HOSTS", "LAKEUI_SPARK_DYNAMIC_ALLOCATION", "SPARK_MASTER", "SPARK_DRIVER_MEMORY",
         "CELERY_WORKER_CONCURRENCY", "LAKEUI_WAREHOUSE"]  # fmt: skip


def test_the_defaults_with_nothing_set(tmp_path, embedded_pgdata):
    values = _settings_in_a_subprocess(
        tmp_path, "lakeui.settings.local", [*NAMES, "DATABASES"], DATABASE_URL="", LAKEUI_PGDATA=str(embedded_pgdata)
    )
    database = values.pop("DATABASES")["default"]  # the embedded server, started by the settings
    assert (database["ENGINE"], database["NAME"]) == ("django.db.backends.postgresql", "lakeui")
    assert database["HOST"] == str(embedded_pgdata)  # its socket's folder
    assert values == {
        "DEBUG": False, "ALLOWED_HOSTS": ["127.0.0.1", "localhost", "[::1]"], "LAKEUI_MAX_ROWS": 100_000,
        "DATA_UPLOAD_MAX_MEMORY_SIZE": 16 * 1024 * 1024, "LAKEUI_JOB_STALE_AFTER": 20, "LAKEUI_JOB_RECOVER_EVERY": 5.0,
        "LAKEUI_INTERACTIVE_TIME_LIMIT": 120, "CELERY_TASK_DEFAULT_QUEUE": "lakeui",
        "LAKEUI_INTERACTIVE_QUEUE": "lakeui-interactive", "LAKEUI_WEBHOOK_QUEUE": "lakeui",
        "LAKEUI_WEBHOOK_RETRY_DELAYS": [10.0, 60.0, 300.0, 1800.0, 7200.0], "LAKEUI_WEBHOOK_TIMEOUT": 10.0,
        "LAKEUI_WEBHOOK_ALLOWED_HOSTS": ["*"], "LAKEUI_SPARK_DYNAMIC_ALLOCATION": True, "SPARK_MASTER": "local[*]",
        "SPARK_DRIVER_MEMORY": "2g", "CELERY_WORKER_CONCURRENCY": 1,
        "LAKEUI_WAREHOUSE": str(settings.BASE_DIR / "var" / "warehouse"),
    }  # fmt: skip


def test_every_value_follows_its_variable_and_derived_defaults_follow_theirs(tmp_path):
    values = _settings_in_a_subprocess(
        tmp_path, "lakeui.settings.local", NAMES,
        DEBUG="off", ALLOWED_HOSTS="lake.example, 10.0.0.5", LAKEUI_MAX_ROWS="5", LAKEUI_MAX_BODY_BYTES="1024",
        LAKEUI_JOB_STALE_AFTER="10", LAKEUI_READ_TIMEOUT="7", LAKEUI_QUEUE="q", LAKEUI_WEBHOOK_RETRY_DELAYS="1,2.5",
        LAKEUI_WEBHOOK_TIMEOUT="3", LAKEUI_WEBHOOK_ALLOWED_HOSTS="*.example.com,10.0.0.0/8",
        LAKEUI_SPARK_DYNAMIC_ALLOCATION="false", SPARK_MASTER="spark://m:7077", SPARK_DRIVER_MEMORY="1g",
        LAKEUI_WORKER_CONCURRENCY="3", LAKEUI_WAREHOUSE="s3a://bucket/wh",
    )  # fmt: skip
    assert values == {
        "DEBUG": False, "ALLOWED_HOSTS": ["lake.example", "10.0.0.5"], "LAKEUI_MAX_ROWS": 5,
        "DATA_UPLOAD_MAX_MEMORY_SIZE": 1024, "LAKEUI_JOB_STALE_AFTER": 10, "LAKEUI_JOB_RECOVER_EVERY": 2.0,
        "LAKEUI_INTERACTIVE_TIME_LIMIT": 7, "CELERY_TASK_DEFAULT_QUEUE": "q", "LAKEUI_INTERACTIVE_QUEUE": "q-interactive",
        "LAKEUI_WEBHOOK_QUEUE": "q", "LAKEUI_WEBHOOK_RETRY_DELAYS": [1.0, 2.5], "LAKEUI_WEBHOOK_TIMEOUT": 3.0,
        "LAKEUI_WEBHOOK_ALLOWED_HOSTS": ["*.example.com", "10.0.0.0/8"], "LAKEUI_SPARK_DYNAMIC_ALLOCATION": False,
        "SPARK_MASTER": "spark://m:7077", "SPARK_DRIVER_MEMORY": "1g", "CELERY_WORKER_CONCURRENCY": 3,
        "LAKEUI_WAREHOUSE": "s3a://bucket/wh",
    }  # fmt: skip


def test_running_settings_follow_this_machines_environment():
    assert connection.vendor == "postgresql"  # the one dialect, embedded or not
    assert (settings.EMBEDDED_PGDATA is None) == bool(os.environ.get("DATABASE_URL"))
    expected_broker = os.environ.get("REDIS_URL") or "filesystem://"
    assert expected_broker == settings.CELERY_BROKER_URL
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        # The suite in CI runs on the machine's PostgreSQL and Redis (.ci/run); the README stage after it runs the
        # embedded defaults.
        assert settings.EMBEDDED_PGDATA is None
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


def test_production_over_plain_http_turns_the_https_settings_off(tmp_path):
    names = ["SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "DEBUG"]
    env = {"SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "lake.example"}
    assert _settings_in_a_subprocess(tmp_path, "lakeui.settings.production", names, **env) == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 365 * 24 * 60 * 60,
        "DEBUG": False,
    }
    plain = _settings_in_a_subprocess(tmp_path, "lakeui.settings.production", names, LAKEUI_HTTPS="false", **env)
    assert plain == {
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
        "DEBUG": False,
    }
