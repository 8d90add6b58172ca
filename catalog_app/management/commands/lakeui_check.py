"""`manage.py lakeui_check [--catalog NAME]`: the consistency check (catalog_app/selectors/consistency.py). It prints
each finding and exits 1 on any; with none it prints a summary line and exits 0."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from catalog_app.selectors.consistency import catalog_findings


class Command(BaseCommand):
    help = "Check the catalogs' refs, commits, files and names for consistency; exit 1 on any finding."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--catalog", help="check only the catalog of this name")

    def handle(self, *args, **options) -> None:
        findings, checked = catalog_findings(warehouse=settings.LAKEUI_WAREHOUSE, catalog=options["catalog"])
        if options["catalog"] is not None and not checked:
            raise CommandError(f"No catalog named {options['catalog']!r}.")
        for finding in findings:
            self.stdout.write(str(finding))
        if findings:
            raise CommandError(f"{len(findings)} finding(s) in {checked} catalog(s).", returncode=1)
        self.stdout.write(f"OK: {checked} catalog(s) consistent.")
