# Two commands for a fresh machine: `make up` (the site, a local worker, seeded data) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)

.PHONY: install up prod test test-fast test-image lint

install: $(STAMP)

# torch==2.13.0 first and pinned: it is the CPU build on this project's machines; the looser
# range in pyproject.toml (which the GPU hosts' 2.11 also satisfies) would otherwise pull CUDA.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[portal,dev]'
	rm -f $(VENV)/.installed-*
	touch $@

up: install
	$(PY) manage.py pkb_up

# The production stack on this machine: gunicorn + whitenoise, the machine's PostgreSQL (database
# pkb) and Redis (db 0), a worker per CPU hardware queue, the reaper. No TLS here: PKB_HTTPS=0.
PROD_ENV = DJANGO_SETTINGS_MODULE=portal.settings.production \
	PKB_SECRET_KEY="$$(cat var/secret_key)" PKB_ALWAYS_LOCAL_CPU=1 \
	DATABASE_URL="$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/pkb}" \
	PKB_BROKER_URL="$${PKB_BROKER_URL:-redis://127.0.0.1:6379/0}" PKB_HTTPS="$${PKB_HTTPS:-0}"

var/secret_key:
	mkdir -p var && $(PY) -c 'import secrets; print(secrets.token_urlsafe(50))' > $@ && chmod 600 $@

prod: install var/secret_key
	$(PROD_ENV) $(PY) manage.py pkb_up --production

# The whole suite with the sandbox on, then the judge's own tests again with it off: verdicts
# must not depend on a host's ability to confine.
test: install
	$(PY) -m pytest
	$(PY) -m pytest -q --sandbox=off tests/evaluator tests/worker

test-fast: install
	$(PY) -m pytest -m "not slow and not browser and not services"

# The container images (Dockerfile) built with podman from a local Debian base and checked end to
# end: the site against this machine's PostgreSQL and Redis, a CPU worker with its sandbox on, one
# upload judged. Needs root, podman, runc and mmdebstrap (.ci/run installs them); minutes, so
# not part of `make test`, whose tests/test_container_image.py checks the Dockerfile without a build.
test-image:
	scripts/container/build_and_run.sh
