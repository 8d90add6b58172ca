"""`assert_consistent()`: the consistency check (manage.py lakeui_check) as an assertion, to call after a
scenario."""

from django.conf import settings

from catalog_app.selectors.consistency import catalog_findings


def assert_consistent(catalog: str | None = None) -> None:
    findings, _ = catalog_findings(warehouse=settings.LAKEUI_WAREHOUSE, catalog=catalog)
    assert not findings, "\n".join(str(f) for f in findings)
