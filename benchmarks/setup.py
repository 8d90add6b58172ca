"""Django set-up for benchmark scripts: the configured database, or a throwaway SQLite file."""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("LAKEUI_VAR_DIR", tempfile.mkdtemp(prefix="lakeui-bench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lakeui.settings.local")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
