from django.urls import path

from . import views

app_name = "catalog"
urlpatterns = [
    path("", views.problem_list, name="problem-list"),
    path("problems/<slug:slug>/", views.problem_detail, name="problem-detail"),
    path("hardware/", views.hardware_list, name="hardware-list"),
    path("hardware/<slug:slug>/", views.hardware_detail, name="hardware-detail"),
]
