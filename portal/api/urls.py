from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from contract.callbacks import REPORT_ROUTE, STATUS_ROUTE, SWEEP_ROUTE

from portal.runs import api as runs

from . import token_views, views, worker_views
from .docs import local_only, redoc_bundle

# The documentation is never throttled: a reader paging through it is not a bot hammering the API.
docs_views = {"throttle_classes": []}

v1 = [
    path("", views.ApiRoot.as_view(), name="root"),
    path("problems/", views.ProblemList.as_view(), name="problem-list"),
    path("problems/<slug:slug>/", views.ProblemDetail.as_view(), name="problem-detail"),
    path("hardware/", views.HardwareList.as_view(), name="hardware-list"),
    path("hardware/<slug:slug>/", views.HardwareDetail.as_view(), name="hardware-detail"),
    path("prompt/", views.Prompt.as_view(), name="prompt"),
    path("submissions/", views.SubmissionListCreate.as_view(), name="submission-list"),
    path("submissions/<int:pk>/", views.SubmissionDetail.as_view(), name="submission-detail"),
    path("leaderboards/models/", views.ModelLeaderboard.as_view(), name="leaderboard-models"),
    path("leaderboards/problems/<slug:slug>/", views.ProblemLeaderboard.as_view(),
         name="leaderboard-problem"),
    path("compare/", views.Compare.as_view(), name="compare"),
    path("runs/", runs.RunListCreate.as_view(), name="run-list"),
    path("runs/pkb-import/", runs.PkbImport.as_view(), name="run-pkb-import"),
    path("runs/<int:pk>/", runs.RunDetail.as_view(), name="run-detail"),
    path("runs/<int:pk>/samples/", runs.RunSamples.as_view(), name="run-samples"),
    path("runs/<int:pk>/progress/", runs.RunProgress.as_view(), name="run-progress"),
    path("runs/<int:pk>/scores/", runs.RunScores.as_view(), name="run-scores"),
    path("auth/token/", token_views.ObtainToken.as_view(), name="token"),
    path(STATUS_ROUTE, worker_views.WorkerStatus.as_view(),
         name="worker-status"),
    path(REPORT_ROUTE, worker_views.WorkerReport.as_view(),
         name="worker-report"),
    path(SWEEP_ROUTE, worker_views.WorkerSweep.as_view(), name="worker-sweep"),
]

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(**docs_views), name="schema"),
    path("docs/", local_only(SpectacularSwaggerView.as_view(url_name="api:schema", **docs_views)),
         name="docs"),
    path("redoc/", local_only(SpectacularRedocView.as_view(url_name="api:schema", **docs_views)),
         name="redoc"),
    # REDOC_DIST points here (settings): the bundle, served without its remote logo.
    path("redoc-assets/bundles/redoc.standalone.js", redoc_bundle, name="redoc-bundle"),
    path("v1/", include(v1)),
    # Anything else under /api/ is a 404 in the API's error shape, not an HTML page.
    re_path(r"^.*$", views.not_found, name="not-found"),
]
