"""Development settings: the embedded defaults work with nothing configured."""

from lakeui.settings.base import *  # noqa: F403
from lakeui.settings.base import ENV, env_bool, env_list

DEBUG = env_bool(ENV, "DEBUG", True)
SECRET_KEY = ENV.get("SECRET_KEY") or "django-insecure-local-development-key-not-for-production"
ALLOWED_HOSTS = env_list(ENV, "ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
