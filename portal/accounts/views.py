from __future__ import annotations

import functools
from typing import Callable

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from rest_framework.authtoken.models import Token

from portal.api.throttles import LoginThrottle, SignupThrottle
from portal.submissions.models import Submission


def _guess_refused(request: HttpRequest) -> int | None:
    """Seconds to wait where this password guess is one too many from its address (the token
    endpoint's throttle, PKB_THROTTLE_LOGIN, shared by every login form); None: go ahead."""
    throttle = LoginThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]
        return None
    return int(throttle.wait() or 60) + 1


class LoginView(auth_views.LoginView):
    """Django's login form, throttled: without it the page took guesses as fast as they came, and
    the API's limit on auth/token/ limited nothing."""

    template_name = "accounts/login.html"

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if (wait := _guess_refused(request)) is not None:
            response = render(request, "accounts/login.html", {"form": self.get_form_class()(request),
                              "throttled": wait}, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)


def throttled_login(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` (the admin's login) with the same throttle on the guesses POSTed to it."""
    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if request.method == "POST" and (wait := _guess_refused(request)) is not None:
            response = HttpResponse(f"Too many login attempts from your address: try again in {wait} s.",
                                    status=429, content_type="text/plain; charset=utf-8")
            response["Retry-After"] = str(wait)
            return response
        return view(request, *args, **kwargs)
    return guarded


def signup(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST or None)
    valid = request.method == "POST" and form.is_valid()
    # Uploads are limited per user: accounts made without limit would multiply every limit. Only
    # accounts about to be made count, not a form sent back with a mistake.
    if valid and not (throttle := SignupThrottle()).allow_request(request, None):  # type: ignore[arg-type]
        wait = int(throttle.wait() or 3600) + 1
        response = render(request, "accounts/signup.html", {"form": form, "throttled": wait}, status=429)
        response["Retry-After"] = str(wait)
        return response
    if valid:
        user = form.save()
        login(request, user)
        messages.success(request, f"Welcome, {user.username}.")
        return redirect("submissions:upload")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    token = Token.objects.filter(user=request.user).first()
    mine = (Submission.objects.owned_by(request.user)
            .select_related("model", "problem_version__problem", "hardware")[:100])
    return render(request, "accounts/profile.html", {"token": token, "submissions": mine})


@login_required
@require_POST
def regenerate_token(request: HttpRequest) -> HttpResponse:
    Token.objects.filter(user=request.user).delete()
    Token.objects.create(user=request.user)
    messages.success(request, "A new API token was created; the old one no longer works.")
    return redirect("accounts:profile")
