from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.authtoken.views import obtain_auth_token

from contract.callbacks import REPORT_ROUTE, STATUS_ROUTE

from . import views, worker_views

v1 = [
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
    path("auth/token/", obtain_auth_token, name="token"),
    path(STATUS_ROUTE, worker_views.WorkerStatus.as_view(),
         name="worker-status"),
    path(REPORT_ROUTE, worker_views.WorkerReport.as_view(),
         name="worker-report"),
]

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
    path("v1/", include(v1)),
]
