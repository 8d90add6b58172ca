"""gunicorn's configuration for the web process (`manage.py serve`, the Docker image): `gunicorn lakeui.wsgi
--config python:lakeui.gunicorn_conf`. Options given on the command line win over these."""

timeout = 180
worker_class = "gthread"
workers = 3
threads = 4
