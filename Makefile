# Two commands for a fresh machine: `make up` (the site, a local worker, seeded data) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)

.PHONY: install up test test-fast lint

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

# The whole suite with the sandbox on, then the judge's own tests again with it off: verdicts
# must not depend on a host's ability to confine.
test: install
	$(PY) -m pytest
	$(PY) -m pytest -q --sandbox=off tests/evaluator tests/worker

test-fast: install
	$(PY) -m pytest -m "not slow and not browser and not services"
