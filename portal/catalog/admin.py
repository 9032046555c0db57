from django.contrib import admin

from .models import Hardware, Problem, ProblemVersion


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["number", "slug", "title", "source_codebase", "retired"]
    search_fields = ["slug", "title", "source_codebase"]
    list_filter = ["retired", "source_codebase"]


@admin.register(ProblemVersion)
class ProblemVersionAdmin(admin.ModelAdmin):
    list_display = ["problem", "version", "is_current", "source_recorded", "created_at"]
    list_filter = ["is_current", "source_recorded"]
    search_fields = ["problem__slug", "version"]


@admin.register(Hardware)
class HardwareAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "kind", "gpus", "world_size", "builtin", "retired"]
