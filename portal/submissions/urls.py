from django.urls import path

from . import views

app_name = "submissions"
urlpatterns = [
    path("upload/", views.upload, name="upload"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/status.json", views.status, name="status"),
    path("<int:pk>/report.json", views.report_json, name="report_json"),
    path("<int:pk>/sweep.json", views.sweep_json, name="sweep_json"),
]
