"""Test settings: the real PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set, else the embedded defaults (the
embedded PostgreSQL server and the filesystem broker).

The worker that the suite starts is a subprocess with these same settings; the values it must share with the
test process (queue name, var folder) are put in the environment so that it inherits them.
"""

import os
import uuid
from pathlib import Path

_root = Path(__file__).resolve().parent.parent.parent
os.environ.setdefault("LAKEUI_VAR_DIR", str(_root / "var" / "test"))
os.environ.setdefault("LAKEUI_WAREHOUSE", str(Path(os.environ["LAKEUI_VAR_DIR"]) / "warehouse"))
# With no DATABASE_URL, one embedded PostgreSQL server for the whole run (var/test/postgres), fixed before the
# folders are split per process below: each process's test database lies on it (pytest-django names them apart).
os.environ.setdefault("LAKEUI_PGDATA", str(Path(os.environ["LAKEUI_VAR_DIR"]) / "postgres"))
# Under pytest-xdist (`make test` runs two test processes) each process has its own test database (pytest-django
# names it per process) and so its own var folder and warehouse: the ids in two databases are the same numbers.
# Their queues are their own too: the two processes inherit one environment from pytest's main process, and a
# worker taking the other process's job would find no such job in its database. The workers a process starts
# inherit the paths and queue already split, with the same PYTEST_XDIST_WORKER.
_xdist = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist and os.environ.get("LAKEUI_TEST_SPLIT") != _xdist:
    for _name in ("LAKEUI_VAR_DIR", "LAKEUI_WAREHOUSE"):
        os.environ[_name] = str(Path(os.environ[_name]) / _xdist)
    os.environ["LAKEUI_QUEUE"] = f"{os.environ.get('LAKEUI_QUEUE') or 'lakeui-test-' + uuid.uuid4().hex[:8]}-{_xdist}"
    os.environ["LAKEUI_TEST_SPLIT"] = _xdist
os.environ.setdefault("LAKEUI_QUEUE", f"lakeui-test-{uuid.uuid4().hex[:8]}")
os.environ.setdefault("LAKEUI_JOB_STALE_AFTER", "8")
# Every Spark JVM of the suite (the test process's and each worker process's) compiles with the JIT's first tier only
# and collects garbage in one thread: the tests' Spark jobs are many and small, and on a machine of few cores the
# optimising compiler's threads took CPU from them (test_strategies.py's JVMs spent a quarter less CPU). Semantics
# are the JVM's to keep, not Spark's plans: these change nothing a test checks. That tier alone gets a 48 MB code
# cache, which a long randomized run fills (the JIT then stops, and the run crawls): 128 MB. A LAKEUI_SPARK_CONF of
# your own wins.
os.environ.setdefault(
    "LAKEUI_SPARK_CONF",
    "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=128m",
)
# Webhook tests send to a server on loopback, and retry within a second.
os.environ.setdefault("LAKEUI_WEBHOOK_ALLOWED_HOSTS", "*,127.0.0.1")
os.environ.setdefault("LAKEUI_WEBHOOK_RETRY_DELAYS", "0.2,0.4")
os.environ.setdefault("LAKEUI_WEBHOOK_TIMEOUT", "2")

from lakeui.settings.base import *  # noqa: E402, F403

SECRET_KEY = "django-insecure-test-key"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
