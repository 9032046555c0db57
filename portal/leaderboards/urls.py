from django.urls import path

from . import views

app_name = "leaderboards"
urlpatterns = [
    path("", views.models, name="models"),
    path("compare/", views.compare, name="compare"),
]
