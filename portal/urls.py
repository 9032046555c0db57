from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", include("portal.catalog.urls")),
    path("submissions/", include("portal.submissions.urls")),
    path("leaderboard/", include("portal.leaderboards.urls")),
    path("accounts/", include("portal.accounts.urls")),
    path("api/", include("portal.api.urls")),
    path("admin/", admin.site.urls),
    path("favicon.ico", RedirectView.as_view(url=static("pkb/favicon.svg"), permanent=True)),
]
