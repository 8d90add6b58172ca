"""Django set-up for benchmark scripts: the configured database, or an embedded PostgreSQL server in a throwaway
folder, stopped when the script ends."""

import atexit
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("LAKEUI_VAR_DIR", tempfile.mkdtemp(prefix="lakeui-bench-"))
        os.environ.setdefault("LAKEUI_PGDATA", str(Path(os.environ["LAKEUI_VAR_DIR"]) / "postgres"))
        from lakeui import embedded_postgres

        atexit.register(embedded_postgres.stop, Path(os.environ["LAKEUI_PGDATA"]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lakeui.settings.local")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def run_job(job) -> None:
    """Run a submitted job in this process (no worker needed); exit with its error if it fails."""
    from lakeui.jobs.models import Job
    from lakeui.jobs.services import job_execute

    job_execute(job_id=str(job.id), worker="bench")
    job.refresh_from_db()
    if job.status != Job.Status.SUCCEEDED:
        sys.exit(f"{job.kind} failed: {job.error_code} {job.error_message}")


def timed(action) -> tuple[float, object]:
    """Milliseconds `action()` took, and what it answered."""
    start = time.perf_counter()
    result = action()
    return (time.perf_counter() - start) * 1000, result
