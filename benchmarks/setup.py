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


def keyed_orders(user, rows: int, prefix: str):
    """A catalog named `prefix` and a few random characters whose main holds shop.orders, a primary-key table (id,
    amount, region) of `rows` rows (id = amount, region `eu`) from one Parquet upload; main's write target."""
    import io
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq
    from django.core.files.uploadedfile import SimpleUploadedFile

    from catalog_app.job_specs import FileUpload, LoadSpec
    from catalog_app.services.commits import WriteTarget
    from catalog_app.services.data_submit import table_load_submit
    from catalog_app.services.databases import database_create
    from catalog_app.services.refs import catalog_create
    from catalog_app.services.tables import table_create

    catalog = catalog_create(name=f"{prefix}_{uuid.uuid4().hex[:6]}", description="benchmark", created_by=user)
    main = WriteTarget(catalog=catalog, branch="main", author=user)
    database_create(target=main, name="shop")
    columns = [{"name": "id", "type": "long", "nullable": False}, {"name": "amount", "type": "long"},
               {"name": "region", "type": "string"}]  # fmt: skip
    table_create(target=main, database="shop", name="orders", columns=columns, primary_key=["id"])
    ids = pa.array(range(rows), pa.int64())
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": ids, "amount": ids, "region": pa.array(["eu"] * rows)}), sink)
    upload = FileUpload(file=SimpleUploadedFile("rows.parquet", sink.getvalue()), format="parquet")
    run_job(table_load_submit(target=main, database="shop", table="orders",
                              spec=LoadSpec(strategy="append_only", source=upload)))  # fmt: skip
    return main
