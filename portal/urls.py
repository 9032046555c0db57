from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("portal.catalog.urls")),
    path("submissions/", include("portal.submissions.urls")),
    path("leaderboard/", include("portal.leaderboards.urls")),
    path("accounts/", include("portal.accounts.urls")),
    path("api/", include("portal.api.urls")),
    path("admin/", admin.site.urls),
]
