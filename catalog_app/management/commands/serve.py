"""Run the web server and the Celery workers together (one for jobs, one for the interactive reads a person waits
for); Ctrl-C (or any of them exiting) stops them all. The web server is gunicorn as the Docker image runs it
(lakeui/gunicorn_conf.py: gthread workers sized from the cores, each on its own listening socket)."""

import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

GUNICORN = ["--config", "python:lakeui.gunicorn_conf"]


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Start the web server on ADDRPORT, a jobs worker and an interactive worker; stop them all on Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, addrport, **options):
        python = sys.executable
        worker = [python, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO"]
        jobs = [*worker, "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "-n", "jobs@%h"]
        interactive = [*worker, "-Q", settings.LAKEUI_INTERACTIVE_QUEUE, "-n", "interactive@%h"]
        processes = [
            subprocess.Popen([*jobs, "--concurrency", str(settings.CELERY_WORKER_CONCURRENCY)]),
            subprocess.Popen([*interactive, "--concurrency", str(settings.LAKEUI_INTERACTIVE_CONCURRENCY)]),
            subprocess.Popen([python, "-m", "gunicorn", "lakeui.wsgi", *GUNICORN, "--bind", addrport]),
        ]
        signal.signal(signal.SIGTERM, _interrupt)
        code = 0
        try:
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
            code = next(process.returncode for process in processes if process.poll() is not None)
            self.stderr.write("One of the processes exited; stopping the others.")
        except KeyboardInterrupt:
            self.stdout.write("Stopping the web server and the workers...")
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
