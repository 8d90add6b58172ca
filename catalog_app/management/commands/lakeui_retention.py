"""`manage.py lakeui_retention [--catalog NAME]`: the scheduled expiry. Enqueues one `retention_expire` job for each
catalog that has retention rules (or the one named), the same job `POST .../retention/expire` enqueues. Run it from
cron (or any scheduler), e.g. daily; garbage collection (`POST .../gc`) then removes the reclaimed files."""

from django.core.management.base import BaseCommand, CommandError

from catalog_app.services.retention import expire_scheduled


class Command(BaseCommand):
    help = "Enqueue a retention expiry job for each catalog with retention rules."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--catalog", help="only the catalog of this name")

    def handle(self, *args, **options) -> None:
        jobs = expire_scheduled(catalog_name=options["catalog"])
        if options["catalog"] is not None and not jobs:
            raise CommandError(f"No catalog named {options['catalog']!r} with retention rules.")
        for name, job in jobs:
            self.stdout.write(f"{name}: job {job.id}")
        self.stdout.write(f"{len(jobs)} expiry job(s) enqueued.")
