# PKB Portal: the web site (gunicorn) or, with another command, a worker.
#   docker build -t pkb-portal .
#   docker run -e DJANGO_SETTINGS_MODULE=portal.settings.production -e PKB_SECRET_KEY=... \
#     -e DATABASE_URL=postgres://... -e PKB_BROKER_URL=redis://... -p 8000:8000 pkb-portal
# GPU hosts run workers from a CUDA image with torch 2.11 instead (see docs/portal.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=portal.settings.production
WORKDIR /app

COPY pyproject.toml README.md* ./
COPY evaluator evaluator
COPY problems problems
COPY portal portal
COPY worker worker
# CPU torch: the site imports problems to show shapes; it never runs a GPU kernel.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" \
 && pip install -e '.[portal]'

COPY hardware hardware
COPY docs docs
COPY templates templates
COPY static static
COPY manage.py ./
RUN PKB_SECRET_KEY=build-only-not-a-secret-0123456789-abcdefghijklmnopqrstuvwxyz DATABASE_URL=sqlite:////tmp/build.sqlite3 PKB_BROKER_URL=redis://localhost \
    python manage.py collectstatic --noinput

RUN useradd --create-home pkb && mkdir -p /app/var && chown pkb /app/var
USER pkb
EXPOSE 8000
CMD ["sh", "-c", "python manage.py migrate --noinput && python manage.py seed && exec gunicorn portal.wsgi:application --bind 0.0.0.0:8000 --workers ${PKB_GUNICORN_WORKERS:-3} --access-logfile -"]
