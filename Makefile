# Rojo Chat: `make run` sets up and serves the app on the embedded defaults; `make test` runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint setup lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The versions are the lock file's (requirements-test.lock: the image's requirements.lock plus
# what the tests need), checked against its hashes; `make lock` renews both from pyproject.toml.
$(VENV)/.installed: pyproject.toml requirements.lock requirements-test.lock | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-test.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed

# --nostatic: the app serves its static files itself (roject/server/static_files.py, which answers
# a traversal with 404); runserver's own handler would answer some with a 500.
run: setup
	DEBUG=1 $(BIN)/python manage.py migrate --no-input
	DEBUG=1 $(BIN)/python manage.py demo --host $(HOST) --port $(PORT)
	DEBUG=1 $(BIN)/python manage.py runserver --nostatic $(HOST):$(PORT)

# Workers of the suite (pytest-xdist), each on a database, storage root and Redis database of
# its own; a module's tests stay on one worker (they share its module-scoped servers).
# PYTEST_ARGS adds options (CI's PostgreSQL + Redis stage: PYTEST_ARGS="-m backend").
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?=
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

.PHONY: bench
# Benchmarks against the fake provider (under six minutes; `bench.run --long` adds the long
# sections); writes docs/performance.md.
# Section 12 runs on PostgreSQL and Redis where these answer (only on an empty Redis
# database, whose keys it deletes afterwards); set either to '' to leave it out.
BENCH_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/postgres
BENCH_REDIS_URL ?= redis://127.0.0.1:6379/11
bench: setup
	BENCH_POSTGRES_URL='$(BENCH_POSTGRES_URL)' BENCH_REDIS_URL='$(BENCH_REDIS_URL)' $(BIN)/python -m bench.run

# Renew the lock files from pyproject.toml's ranges: universal (every Python 3.11.x, every
# platform's wheels hashed), so the image, CI and a laptop install the same versions.
LOCK_INDEX ?= https://pypi.org/simple
lock: $(BIN)/python
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile --universal --python-version 3.11 --generate-hashes --quiet \
	  --index-url $(LOCK_INDEX) --output-file requirements.lock pyproject.toml
	$(BIN)/uv pip compile --universal --python-version 3.11 --generate-hashes --quiet \
	  --index-url $(LOCK_INDEX) --extra test --constraint requirements.lock \
	  --output-file requirements-test.lock pyproject.toml
