"""Development settings: the embedded defaults work with nothing configured."""

from lakeui.settings.base import *  # noqa: F403
from lakeui.settings.base import env

DEBUG = env.bool("DEBUG", True)
SECRET_KEY = env.str("SECRET_KEY", "django-insecure-local-development-key-not-for-production")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
