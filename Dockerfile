# PKB Portal images: the web site (target `site`) and a CPU evaluation worker (target `worker`).
# How to build and run them, and what the runtime must allow: docs/portal.md#container-images.
#
#   docker build --target site   -t pkb-site .
#   docker build --target worker -t pkb-worker .
#
# BASE is any Debian-like image with python3 (3.11+) and its venv module: python:3.11-slim on
# bookworm by default; scripts/container/build_and_run.sh passes a bookworm made with mmdebstrap.
ARG BASE=python:3.11-slim-bookworm

# --- deps: a virtual environment with torch (CPU build) and every third-party package ---------
FROM ${BASE} AS deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build, pinned with its +cpu label so that pip fails rather than pull PyPI's CUDA build
# (gigabytes). Elsewhere it comes from PyTorch's CPU index; where it lies on disk, pass
# TORCH_INDEX_URL= (empty) and PIP_FIND_LINKS=<a folder mounted into the build> instead. A GPU
# worker's image sets TORCH_VERSION, TORCH_VARIANT (cu130) and the index (docs/portal.md).
# PIP_CERT names a CA bundle mounted into the build, for a network that inspects TLS.
ARG TORCH_VERSION=2.13.0
ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_FIND_LINKS
ARG PIP_INDEX_URL
ARG PIP_CERT
RUN python3 -m venv /opt/pkb \
 && /opt/pkb/bin/pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==${TORCH_VERSION}+${TORCH_VARIANT}"
COPY pyproject.toml scripts/container/requirements.py /tmp/pkb/
# tzdata: kombu needs the UTC zone at import and finds none on a base without the system's
# time-zone files (a minimal Debian, newer slim images).
RUN /opt/pkb/bin/python /tmp/pkb/requirements.py /tmp/pkb/pyproject.toml portal client > /tmp/pkb/requirements.txt \
 && /opt/pkb/bin/pip install -r /tmp/pkb/requirements.txt tzdata \
 && /opt/pkb/bin/pip uninstall -y -q pip

# --- runtime: what both images hold: the environment, a user, the evaluator and its data -------
FROM ${BASE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/pkb/bin:$PATH PYTHONPATH=/app:/app/client
RUN useradd --uid 10001 --user-group --no-log-init --create-home --shell /usr/sbin/nologin pkb
COPY --from=deps /opt/pkb /opt/pkb
# The `pkb` command a `pip install` of the project would make (the code stays in /app, where the
# settings and the sandbox expect a checkout's layout).
RUN printf '#!/opt/pkb/bin/python\nimport sys\nfrom evaluator.cli import main\nsys.exit(main())\n' \
      > /opt/pkb/bin/pkb && chmod 755 /opt/pkb/bin/pkb
WORKDIR /app
COPY hardware hardware
COPY contract contract
COPY problems problems
COPY evaluator evaluator
COPY client/pkb_client client/pkb_client
COPY worker worker
RUN mkdir -p /app/var && chown pkb:pkb /app/var

# --- worker: takes jobs from one hardware queue and runs `pkb eval` in the sandbox ------------
# The sandbox needs user namespaces inside the container (docs/portal.md#container-images says
# what the runtime must allow); without them the worker refuses to start.
FROM runtime AS worker
USER pkb
HEALTHCHECK --interval=60s --timeout=20s --start-period=30s --retries=3 \
  CMD celery -A worker inspect ping --timeout 10 -d "${PKB_WORKER_HARDWARE}@$(hostname)" >/dev/null || exit 1
CMD ["sh", "-c", ": \"${PKB_WORKER_HARDWARE:?set PKB_WORKER_HARDWARE to the hardware profile this worker serves (its queue is pkb.hw.<id>)}\"; exec celery -A worker worker -Q \"pkb.hw.$PKB_WORKER_HARDWARE,pkb.hw.$PKB_WORKER_HARDWARE.baseline\" --concurrency 1 --prefetch-multiplier 1 -n \"$PKB_WORKER_HARDWARE@%h\" --loglevel INFO --without-gossip --without-mingle"]

# --- site: gunicorn, migrations and seed at start; static files collected at build ------------
FROM runtime AS site
ENV DJANGO_SETTINGS_MODULE=portal.settings.production
COPY portal portal
COPY templates templates
COPY static static
COPY manage.py ./
# seed imports these; the prompt page shows the two worked examples (portal/catalog/prompt_hardware.py).
COPY docs/results docs/results
COPY docs/measurements docs/measurements
COPY solutions/symm_mem/all_gather_push.py solutions/symm_mem/
COPY solutions/triton/all_reduce_triton.py solutions/triton/
RUN PKB_SECRET_KEY=build-only-not-a-secret-0123456789-abcdefghijklmnopqrstuvwxyz \
    DATABASE_URL=sqlite:////tmp/build.sqlite3 PKB_BROKER_URL=redis://localhost \
    python manage.py collectstatic --noinput -v 0
USER pkb
EXPOSE 8000
# X-Forwarded-Proto: with PKB_HTTPS on (the default) a plain request is redirected to https.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
  CMD python -c "import os, urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:%s/api/v1/' % os.environ.get('PKB_PORT', '8000'), headers={'X-Forwarded-Proto': 'https'}), timeout=8)" || exit 1
CMD ["sh", "-c", "python manage.py migrate --noinput && python manage.py seed && exec gunicorn portal.wsgi:application --bind 0.0.0.0:${PKB_PORT:-8000} --workers ${PKB_GUNICORN_WORKERS:-3} --worker-class gthread --threads 8 --timeout 60 --access-logfile - --error-logfile -"]
