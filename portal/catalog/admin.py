from django.contrib import admin

from .models import Hardware, Problem, ProblemVersion, ReferenceTiming


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


@admin.register(ReferenceTiming)
class ReferenceTimingAdmin(admin.ModelAdmin):
    list_display = ["problem_version", "hardware", "world_size", "size", "median_ms",
                    "roofline_fraction", "source_file", "measured_on"]
    list_filter = ["hardware", "source_file"]
    search_fields = ["problem_version__problem__slug"]
