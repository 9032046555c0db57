from django.urls import path

from . import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("compare/", views.compare, name="compare"),
    path("<int:pk>/", views.run_detail, name="detail"),
]
