from django.urls import path
from django.views.generic import RedirectView

from . import docs, views

app_name = "catalog"
urlpatterns = [
    path("", views.problem_list, name="problem-list"),
    # The list lives at /; people type /problems/ from a problem page's URL.
    path("problems/", RedirectView.as_view(pattern_name="catalog:problem-list", query_string=True)),
    path("problems/<slug:slug>/", views.problem_detail, name="problem-detail"),
    path("hardware/", views.hardware_list, name="hardware-list"),
    path("hardware/<slug:slug>/", views.hardware_detail, name="hardware-detail"),
    path("docs/<slug:name>.md", docs.doc, name="doc"),
]
