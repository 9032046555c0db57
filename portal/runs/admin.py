from django.contrib import admin

from .models import Run, RunSample


class RunSampleInline(admin.TabularInline):
    model = RunSample
    extra = 0
    fields = ("name", "status", "problem", "index", "submission", "code", "message", "pkb_id",
              "adapter", "turn")
    readonly_fields = fields
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "model", "provider", "hardware", "backend", "precision", "k", "owner",
                    "imported_from", "created_at")
    list_filter = ("hardware", "backend", "precision")
    search_fields = ("model__name", "provider", "note", "imported_from")
    inlines = [RunSampleInline]


@admin.register(RunSample)
class RunSampleAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "name", "status", "problem", "index", "code", "turn")
    list_filter = ("status", "code")
    search_fields = ("name", "message")
    raw_id_fields = ("run", "submission", "problem")
