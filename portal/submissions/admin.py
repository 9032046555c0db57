from django.contrib import admin

from .models import AIModel, Submission


@admin.register(AIModel)
class AIModelAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "kind", "created_at"]
    search_fields = ["name", "provider"]


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ["id", "model", "problem_version", "hardware", "status", "verdict",
                    "failure_class", "speedup", "created_at"]
    list_filter = ["status", "verdict", "hardware", "origin"]
    search_fields = ["model__name", "problem_version__problem__slug", "user__username"]
    raw_id_fields = ["user", "model", "problem_version", "hardware"]
    readonly_fields = ["token_hash", "report"]
