"""Run the web server and a Celery worker together; Ctrl-C (or either one exiting) stops both."""

import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Start the web server on ADDRPORT and a Celery worker; stop both on Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, addrport, **options):
        python = sys.executable
        worker_cmd = [python, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO"]
        worker_cmd += ["--concurrency", str(settings.CELERY_WORKER_CONCURRENCY)]
        processes = [
            subprocess.Popen(worker_cmd),
            subprocess.Popen([python, "manage.py", "runserver", "--noreload", addrport]),
        ]
        signal.signal(signal.SIGTERM, _interrupt)
        code = 0
        try:
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
            code = next(process.returncode for process in processes if process.poll() is not None)
            self.stderr.write("One of the processes exited; stopping the other.")
        except KeyboardInterrupt:
            self.stdout.write("Stopping the web server and the worker...")
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        sys.exit(code)
