"""Pure functions that turn environment variables into settings.

They take the environment as a mapping so that tests can check every choice (PostgreSQL or SQLite, Redis or
the filesystem broker) without reloading the settings module.
"""

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

SQLITE_OPTIONS = {
    # Django 5.1+: BEGIN IMMEDIATE makes each atomic block take the write lock up front, so concurrent writers
    # (web and worker processes) queue instead of failing with "database is locked" half-way.
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
SUPPORTED_DATABASE_ENGINES = ("django.db.backends.postgresql", "django.db.backends.sqlite3")


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def spark_conf(env: Mapping[str, str], name: str) -> dict[str, str]:
    """`key=value,key=value` as a dict of Spark settings (keys must start with `spark.`)."""
    conf = {}
    for item in env_list(env, name, []):
        key, equals, value = item.partition("=")
        if not equals or not key.strip().startswith("spark."):
            raise ImproperlyConfigured(f"{name} must be spark.key=value pairs separated by commas, not {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def env_list(env: Mapping[str, str], name: str, default: list[str]) -> list[str]:
    value = env.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def database_config(env: Mapping[str, str], var_dir: Path) -> dict:
    """PostgreSQL (or an explicit SQLite file) from DATABASE_URL, else a SQLite file under var/."""
    url = env.get("DATABASE_URL")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(var_dir / "lakeui.sqlite3"),
            "OPTIONS": SQLITE_OPTIONS,
        }
    config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    if config["ENGINE"] not in SUPPORTED_DATABASE_ENGINES:
        raise ImproperlyConfigured(f"DATABASE_URL must be postgres:// or sqlite://, not {urlparse(url).scheme}://")
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = dict(SQLITE_OPTIONS)
        config["CONN_MAX_AGE"] = 0
    return config


def celery_broker_config(env: Mapping[str, str], var_dir: Path, *, visibility_timeout: int) -> dict:
    """Redis from REDIS_URL (broker and result backend), else kombu's filesystem transport under var/."""
    url = env.get("REDIS_URL")
    if url:
        if urlparse(url).scheme not in ("redis", "rediss"):
            raise ImproperlyConfigured("REDIS_URL must be redis:// or rediss://")
        options = {"visibility_timeout": visibility_timeout}
        return {
            "broker_url": url,
            "broker_transport": None,
            "result_backend": url,
            "broker_transport_options": options,
            "result_backend_transport_options": options,
        }
    queue_dir = var_dir / "broker" / "queue"
    return {
        "broker_url": "filesystem://",
        "broker_transport": "lakeui.broker:Transport",  # atomic message files (see lakeui/broker.py)
        "result_backend": f"file://{var_dir / 'broker' / 'results'}",
        "broker_transport_options": {
            "data_folder_in": str(queue_dir),
            "data_folder_out": str(queue_dir),
            "control_folder": str(var_dir / "broker" / "control"),
            "store_processed": False,
        },
        "result_backend_transport_options": {},
    }


def filesystem_broker_dirs(config: dict) -> list[Path]:
    """The folders the filesystem transport and result backend need (they are not created by kombu)."""
    if config["broker_url"] != "filesystem://":
        return []
    options = config["broker_transport_options"]
    return [
        Path(options["data_folder_in"]),
        Path(options["control_folder"]),
        Path(config["result_backend"].removeprefix("file://")),
    ]


def warehouse_location(env: Mapping[str, str], base_dir: Path) -> str:
    """An absolute path for a local warehouse; a URI with a scheme (s3a://, hdfs://, file://) is kept as given."""
    value = env.get("LAKEUI_WAREHOUSE") or "var/warehouse"
    if "://" in value:
        return value
    path = Path(value)
    return str(path if path.is_absolute() else base_dir / path)
