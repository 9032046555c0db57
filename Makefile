# Two commands for a fresh machine: `make up` (the site, a local worker, seeded data) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)

.PHONY: install up prod test test-long test-fast test-image lint

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

# Every test but the long scenarios (marker `long`: make test-long runs them, and CI runs both),
# with the sandbox on; then tests/evaluator again with it off: verdicts must not depend on a host's
# ability to confine. Unconfined, an evaluation differs only in how its ranks start and die
# (evaluator/sandbox/plain.py) and in the re-hash of the candidate's outputs (evaluator/outputs.py).
# The second pass leaves out what would run the same code again (docs/tests.md says why for each):
# files that judge values in this process or in an mp.spawn group no sandbox touches, argument
# parsing, one that runs both modes itself (test_confinement), judging of values whose verdict no
# launch path changes, and a subprocess that starts no sandbox (test_exact_startup). tests/worker,
# which it used to run too, runs a stand-in for `pkb eval` and never reaches the switch. A new file
# in tests/evaluator runs both ways. Within the files it runs, tests marked unconfined_in_long
# count as long with the sandbox off (their verdict comes from inside a rank, before ranks start,
# from the status pipe or from the parent's judge of values): make test-long runs them unconfined.
CONFINEMENT_BLIND = test_accuracy test_compare test_stats test_cli test_cli_probe \
	test_paired_timing test_confinement test_exact_judging test_decision_band \
	test_lossy_candidates test_sweep test_judge_buffers test_liveness test_exact_startup

# Both passes run on TEST_WORKERS pytest-xdist workers (docs/tests.md has the measurements; 0: one
# process). loadgroup keeps the tests that share an expensive module fixture (marked xdist_group)
# on one worker; --no-loadscope-reorder keeps the order tests/conftest.py gives (slow ones first).
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test: install
	$(PY) -m pytest $(XDIST) -m "not long"
	$(PY) -m pytest $(XDIST) -q --sandbox=off -m "not long" tests/evaluator \
		$(foreach f,$(CONFINEMENT_BLIND),--ignore=tests/evaluator/$(f).py)

# The long scenarios: a worker killed mid-evaluation, services that crash and come back, runs
# from creation to scores through a live server, the PKB import end to end, every PKB adapter,
# the sandbox's attack suite, the docs' CPU evaluations run as written, and the attacks on the
# judge (docs/judge.md), sandbox on and off; the costliest cases of suites make test runs in part
# (world size 8 of the reference and exact-judging suites, a real g++ failure in a torch
# extension build, the benchmark scripts: docs/tests.md lists them); then, sandbox off, what make
# test runs only confined.
test-long: install
	$(PY) -m pytest -m long
	$(PY) -m pytest -q --sandbox=off -m long tests/evaluator \
		$(foreach f,$(CONFINEMENT_BLIND),--ignore=tests/evaluator/$(f).py)

test-fast: install
	$(PY) -m pytest -m "not slow and not browser and not services and not long"

# The container images (Dockerfile) built with podman from a local Debian base and checked end to
# end: the site against this machine's PostgreSQL and Redis, a CPU worker with its sandbox on, one
# upload judged. Needs root, podman, runc and mmdebstrap (.ci/run installs them); minutes, so
# not part of `make test`, whose tests/test_container_image.py checks the Dockerfile without a build.
test-image:
	scripts/container/build_and_run.sh
