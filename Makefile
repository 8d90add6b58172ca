# The two commands of the README: `make run` and `make test`. Both install what they need into .venv: `make run` the
# runtime (requirements.txt) and the client, `make test` the test and lint tools on top (requirements-test.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run dev test install install-test browser lint format migrate worker web clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet -e ./clients/python
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $(TEST_STAMP)

install: $(STAMP)

install-test: $(TEST_STAMP)

# The browser tests drive Debian's Chromium (Playwright cannot download its own browser builds here).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || command -v chromium >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "Installing Debian's chromium for the browser tests"; \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "No Chromium at $(CHROMIUM): install it (e.g. apt install chromium) for the browser tests"; fi; }

migrate: install
	$(BIN)/python manage.py migrate --noinput

# With no DATABASE_URL every step uses the embedded PostgreSQL server under var/postgres (the first step starts it);
# serve stops it with the web server and the workers, and the trap stops it too if a step before serve fails.
run: install
	@trap '$(BIN)/python -m lakeui.embedded_postgres stop >/dev/null' EXIT; \
	  $(BIN)/python manage.py migrate --noinput && \
	  $(BIN)/python manage.py lakeui_demo && \
	  $(BIN)/python manage.py serve 127.0.0.1:8000

# `make run` with Django's DEBUG on: stack-trace pages for a developer, never for a server others use.
dev:
	DEBUG=true $(MAKE) run

# The suite runs in TEST_PROCESSES processes (pytest-xdist, whole test files to each): each has its own test database,
# workers and warehouse (lakeui/settings/test.py). Most of a test's time is spent waiting on a worker's Spark job, so
# two processes on two cores finish the suite in about two thirds of the time. TEST_PROCESSES=0 runs one process.
TEST_PROCESSES ?= 2
# With no DATABASE_URL the suite's test databases lie on an embedded PostgreSQL server of its own (var/test/postgres),
# stopped when the suite ends.
test: install-test browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@status=0; $(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS) || status=$$?; \
	  LAKEUI_VAR_DIR=$${LAKEUI_VAR_DIR:-var/test} $(BIN)/python -m lakeui.embedded_postgres stop >/dev/null; \
	  exit $$status

lint: install-test
	$(BIN)/ruff check .

format: install-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

worker: install
	$(BIN)/python -m celery -A lakeui worker --loglevel INFO

web: migrate
	$(BIN)/python manage.py runserver 127.0.0.1:8000

clean:
	-LAKEUI_VAR_DIR=var/test $(BIN)/python -m lakeui.embedded_postgres stop
	rm -rf var/test .pytest_cache
