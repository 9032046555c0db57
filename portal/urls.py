from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from portal.accounts.views import throttled_login



class FaviconRedirect(RedirectView):
    """Resolved per request: under the manifest storage of production the hashed name exists
    only after collectstatic, which itself imports this module."""

    permanent = True

    def get_redirect_url(self, *args: object, **kwargs: object) -> str:
        return static("pkb/favicon.svg")


urlpatterns = [
    path("", include("portal.catalog.urls")),
    path("submissions/", include("portal.submissions.urls")),
    path("leaderboard/", include("portal.leaderboards.urls")),
    # The API says leaderboards/models/; a reader who types that here gets the page, not a 404.
    path("leaderboards/", RedirectView.as_view(pattern_name="leaderboards:models", permanent=True,
                                               query_string=True)),
    path("leaderboards/models/", RedirectView.as_view(pattern_name="leaderboards:models",
                                                      permanent=True, query_string=True)),
    path("runs/", include("portal.runs.urls")),
    path("accounts/", include("portal.accounts.urls")),
    path("api/", include("portal.api.urls")),
    # Before the admin's own: its login form takes password guesses for staff accounts.
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
    path("favicon.ico", FaviconRedirect.as_view()),
]

# An unreachable database or Redis answers 503 (JSON under /api/), not a bare 500.
handler500 = "portal.lib.outage.server_error"
handler404 = "portal.api.errors.page_not_found"
