from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from rest_framework.authtoken.models import Token

from portal.submissions.models import Submission


def signup(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
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
