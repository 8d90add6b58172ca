"""The environment read into settings with django-environ, and the settings built from several variables.

`Env` is django-environ's reader (`env.int("LAKEUI_MAX_ROWS", 100_000)`, `env.list(...)`, `env.bool(...)`, its
database URL parser) with LakeUI's three rules, which every variable of docs/configuration.md keeps:

- a variable set to the empty string counts as unset and gives its default (as `VAR=` in a compose file means);
- booleans are strict: 1/true/yes/on or 0/false/no/off, anything else refuses to start (django-environ would read
  a typo as false);
- a value is taken as written: django-environ would read a value starting with `$` as the name of another
  variable, which would change a SECRET_KEY that starts with one;
- a list's items are stripped and empty ones dropped (`a, b,` is `["a", "b"]`).

A bad value is an `ImproperlyConfigured` naming the variable. The functions take the environment as a mapping so
that tests can check every choice (a PostgreSQL URL or the embedded server, Redis or the filesystem broker) without
reloading the settings module.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

import environ
from django.core.exceptions import ImproperlyConfigured

# One SQL dialect: the app's raw SQL (arrays, COPY, prepared statements, row versions) is PostgreSQL's.
POSTGRES_ENGINE = "django.db.backends.postgresql"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Env(environ.Env):
    """django-environ's reader over `environ` (the process's environment by default), with the rules above."""

    def __init__(self, environ: Mapping[str, str] = os.environ, **scheme):
        super().__init__(**scheme)
        self.ENVIRON = environ

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        raw = self.ENVIRON.get(var, "")
        if raw == "":
            if default is self.NOTSET:
                raise ImproperlyConfigured(f"{var} must be set")
            return default
        if cast is bool:
            if raw.strip().lower() not in TRUE + FALSE:
                raise ImproperlyConfigured(f"{var} must be true or false, not {raw!r}")
            return raw.strip().lower() in TRUE
        try:
            return self.parse_value(raw, cast)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{var} has a value of the wrong kind: {raw!r} ({exc})") from exc

    def list(self, var, cast=None, default=environ.Env.NOTSET) -> list:
        if self.ENVIRON.get(var, "") == "":
            return self.get_value(var, default=default)
        items = [item.strip() for item in self.ENVIRON[var].split(",") if item.strip()]
        try:
            return [cast(item) for item in items] if cast else items
        except ValueError as exc:
            raise ImproperlyConfigured(f"{var} must be a comma-separated list of {cast.__name__}: {exc}") from exc


def spark_conf(env: Mapping[str, str], name: str) -> dict[str, str]:
    """`key=value,key=value` as a dict of Spark settings (keys must start with `spark.`)."""
    conf = {}
    for item in Env(env).list(name, default=[]):
        key, equals, value = item.partition("=")
        if not equals or not key.strip().startswith("spark."):
            raise ImproperlyConfigured(f"{name} must be spark.key=value pairs separated by commas, not {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def database_config(env: Mapping[str, str], var_dir: Path) -> dict:
    """PostgreSQL from DATABASE_URL, else the embedded PostgreSQL server under var/ (`embedded_pgdata`), whose
    socket `lakeui.embedded_postgres.start` adds once the server runs. Any other database refuses to start."""
    url = Env(env).str("DATABASE_URL", "")
    config = Env.db_url_config(url) if url else {"ENGINE": POSTGRES_ENGINE}
    if config.get("ENGINE") != POSTGRES_ENGINE:
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a postgres:// URL, not {urlparse(url).scheme}://: LakeUI keeps its metadata in "
            "PostgreSQL only (unset DATABASE_URL to use the embedded PostgreSQL server under var/)"
        )
    if config.get("HOST", "").lower().startswith("%2f"):  # a socket folder, percent-encoded as libpq's URLs write it
        config["HOST"] = unquote(config["HOST"])
    # Connections are kept for a minute and checked before reuse (a restarted PostgreSQL costs no request).
    config.setdefault("CONN_MAX_AGE", 60)
    config.setdefault("CONN_HEALTH_CHECKS", True)
    return config


def embedded_pgdata(env: Mapping[str, str], var_dir: Path) -> Path | None:
    """The embedded server's data folder when no DATABASE_URL is set (LAKEUI_PGDATA, default `var/postgres`)."""
    reader = Env(env)
    if reader.str("DATABASE_URL", ""):
        return None
    return Path(reader.str("LAKEUI_PGDATA", str(var_dir / "postgres")))


def celery_broker_config(env: Mapping[str, str], var_dir: Path, *, visibility_timeout: int) -> dict:
    """Redis from REDIS_URL (broker and result backend), else kombu's filesystem transport under var/."""
    url = Env(env).str("REDIS_URL", "")
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
    value = Env(env).str("LAKEUI_WAREHOUSE", "var/warehouse")
    if "://" in value:
        return value
    path = Path(value)
    return str(path if path.is_absolute() else base_dir / path)
