"""`make run`'s settings: the embedded defaults work with nothing configured. DEBUG stays off as in production (every
error its protocol's JSON, error pages without a traceback); `make dev` (DEBUG=true) turns it on."""

from lakeui.settings.base import *  # noqa: F403
from lakeui.settings.base import env

SECRET_KEY = env.str("SECRET_KEY", "django-insecure-local-development-key-not-for-production")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
