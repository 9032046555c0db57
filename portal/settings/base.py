"""Settings shared by every environment. Environment-specific files override a few names."""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from .env import envbool, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parents[2]
VAR_DIR = Path(envstr("PKB_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = envstr("PKB_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = envbool("PKB_DEBUG", False)
ALLOWED_HOSTS = envlist("PKB_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = envlist("PKB_CSRF_TRUSTED_ORIGINS", [])
CSRF_FAILURE_VIEW = "portal.api.errors.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal.accounts",
    "portal.catalog",
    "portal.submissions",
    "portal.leaderboards",
    "portal.runs",
    "portal.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{VAR_DIR / 'pkb.sqlite3'}"), conn_max_age=60,
    ),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default has several writers at once (gunicorn's threads, the local worker's
    # callbacks, a bulk import): SQLite's default of failing a write at once when another holds
    # the lock turned a run import into a 503 on a GPU host. Writers wait up to 20 s instead,
    # take the write lock when their transaction starts (so two readers never deadlock upgrading
    # to writers), and readers do not block the writer (WAL).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "catalog:problem-list"
LOGOUT_REDIRECT_URL = "catalog:problem-list"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(envstr("PKB_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "portal.lib.staticfinders.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.tokens.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.StorableJSONParser", "portal.api.parsers.StorableFormParser",
                               "portal.api.parsers.StorableMultiPartParser"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": envstr("PKB_THROTTLE_ANON", "120/min"),
        "user": envstr("PKB_THROTTLE_USER", "600/min"),
        "submit": envstr("PKB_THROTTLE_SUBMIT", "20/min"),
        "login": envstr("PKB_THROTTLE_LOGIN", "10/min"),  # password attempts at auth/token/ per address
        "signup": envstr("PKB_THROTTLE_SIGNUP", "10/hour"),  # new accounts per address
    },
    # How throttles name an anonymous client. Unset, DRF takes the whole X-Forwarded-For header, which
    # a client writes as it likes: a new made-up address each try lifted every per-address limit
    # (password guesses included). 0: the connection's address; behind N proxies that append to the
    # header, N (production sets 1 behind its TLS proxy).
    "NUM_PROXIES": envint("PKB_NUM_PROXIES", 0),
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.ErrorDocumentingSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "PKB Portal API",
    "DESCRIPTION": "Problems, hardware, prompts, submissions and leaderboards of the PKB "
                   "multi-GPU kernel benchmark. Authenticate with `Authorization: Token <key>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Tags (the docs' sections) from the segment after /api/v1/: problems, submissions, runs, ...
    # instead of one "v1" section holding every endpoint.
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "/api/redoc-assets",  # the sidecar's bundle, served by portal.api.docs
    # System fonts: ReDoc's page must load nothing from the internet (templates/drf_spectacular/).
    "REDOC_UI_SETTINGS": {"theme": {"typography": {
        "fontFamily": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
        "headings": {"fontFamily": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"},
        "code": {"fontFamily": "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"}}}},
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"SubmissionBackendEnum": "portal.submissions.models.BACKENDS",
                            "SubmissionStatusEnum": "portal.submissions.models.Status",
                            "WorkerStatusEnum": ["compiling", "running"]},
}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- PKB: submissions and workers -------------------------------------------------------------
PKB_MAX_SOURCE_BYTES = envint("PKB_MAX_SOURCE_BYTES", 256 * 1024)
PKB_DAILY_SUBMISSION_CAP = envint("PKB_DAILY_SUBMISSION_CAP", 100)
PKB_TOKEN_MAX_AGE_DAYS = envint("PKB_TOKEN_MAX_AGE_DAYS", 180)  # API tokens; 0: never expire
PKB_EVAL_TIMEOUT_S = envint("PKB_EVAL_TIMEOUT_S", 900)  # one evaluation, enforced by the worker
PKB_RUN_GRACE_S = envint("PKB_RUN_GRACE_S", 120)  # slack before the reaper fails a running job
PKB_QUEUE_TIMEOUT_S = envint("PKB_QUEUE_TIMEOUT_S", 24 * 3600)  # queued with no worker taking it
PKB_EVAL_TRIALS = envint("PKB_EVAL_TRIALS", 5)
# Uploads to hardware that no live worker serves are refused (503 no_worker) instead of queued.
PKB_REQUIRE_LIVE_WORKER = envbool("PKB_REQUIRE_LIVE_WORKER", True)
PKB_WORKER_LIVENESS_TTL_S = envint("PKB_WORKER_LIVENESS_TTL_S", 15)  # cache of the workers' answer
PKB_WORKER_INSPECT_TIMEOUT_S = float(envstr("PKB_WORKER_INSPECT_TIMEOUT_S", "1.0"))
# Message-size sweeps (docs/sweeps.md): the whole sweep's limit, and the sizes CPU workers sweep
# (gloo at 256 MiB would take minutes per size for a smoke test); GPU workers sweep the problem's.
PKB_SWEEP_TIMEOUT_S = envint("PKB_SWEEP_TIMEOUT_S", 3600)
PKB_SWEEP_SIZES_CPU = [int(b) for b in envlist("PKB_SWEEP_SIZES_CPU", ["4096", "65536", "1048576"])]
# Where workers POST status and reports: the portal's address as seen from the GPU hosts.
PKB_CALLBACK_BASE_URL = envstr("PKB_CALLBACK_BASE_URL", "http://127.0.0.1:8000")
PKB_PROBLEMS_PACKAGE = envstr("PKB_PROBLEMS_PACKAGE", "problems")
PKB_HARDWARE_DIR = Path(envstr("PKB_HARDWARE_DIR", str(BASE_DIR / "hardware")))
PKB_RESULTS_DIR = Path(envstr("PKB_RESULTS_DIR", str(BASE_DIR / "docs" / "results")))
PKB_MEASUREMENTS_DIR = Path(envstr("PKB_MEASUREMENTS_DIR", str(BASE_DIR / "docs" / "measurements")))
PKB_LOCAL_HARDWARE = envstr("PKB_LOCAL_HARDWARE", "local-cpu")  # the builtin CPU/gloo profile
# Keep the builtin local-cpu profile beside a published CPU profile (two CPU queues on one host).
PKB_ALWAYS_LOCAL_CPU = envbool("PKB_ALWAYS_LOCAL_CPU", False)
# A queued submission with no task id after this long lost its dispatch (the web process died
# between commit and send): the reaper sends it again with a fresh secret.
PKB_DISPATCH_GRACE_S = envint("PKB_DISPATCH_GRACE_S", 60)
PKB_REAP_EVERY_S = envint("PKB_REAP_EVERY_S", 60)
# Leaderboards are cached until a result lands (portal.leaderboards.cache); 0 turns that off.
PKB_BOARD_CACHE_S = envint("PKB_BOARD_CACHE_S", 3600)

# --- Celery (read by portal/celery.py under the CELERY_ prefix) -------------------------------
CELERY_BROKER_URL = envstr("PKB_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "pkb.portal"
CELERY_BEAT_SCHEDULE = {
    "reap-stuck-submissions": {
        "task": "portal.submissions.reap_stuck",
        "schedule": float(PKB_REAP_EVERY_S),
        "options": {"queue": "pkb.portal"},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("PKB_LOG_LEVEL", "INFO")},
    # "django" gets our handler and stops there: with Django's own console handler (DEBUG only)
    # and propagation to the root both active, every message of it was printed twice.
    "loggers": {"django": {"handlers": ["console"], "level": "INFO", "propagate": False},
                "django.server": {"level": "WARNING"}},
}

# --- PKB: runs (a model's sample set) ---------------------------------------------------------
PKB_RUN_MAX_K = envint("PKB_RUN_MAX_K", 100)  # samples per problem a run may hold
PKB_RUN_MAX_SAMPLES = envint("PKB_RUN_MAX_SAMPLES", 5000)  # samples in one run
PKB_RUN_DAILY_SAMPLE_CAP = envint("PKB_RUN_DAILY_SAMPLE_CAP", 2000)  # run samples per user per 24 h
PKB_RUN_MAX_ARCHIVE_BYTES = envint("PKB_RUN_MAX_ARCHIVE_BYTES", 32 * 2**20)  # one upload, compressed
PKB_RUN_MAX_ARCHIVE_FILES = envint("PKB_RUN_MAX_ARCHIVE_FILES", 2000)  # entries in one archive
PKB_RUN_MAX_UNPACKED_BYTES = envint("PKB_RUN_MAX_UNPACKED_BYTES", 128 * 2**20)  # its files together
