"""Read serializers per resource, and write serializers per action."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.lib.reports import schema_error
from portal.submissions.models import BACKENDS, Submission
from portal.submissions.lifecycle import overdue_reason


class VersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProblemVersion
        fields = ["version", "is_current", "source_recorded", "created_at"]


class ProblemListSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="number")
    categories = serializers.ListField(child=serializers.CharField())
    collectives = serializers.ListField(child=serializers.CharField())
    version = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    solved = serializers.BooleanField(read_only=True, default=None)

    class Meta:
        model = Problem
        fields = ["id", "slug", "title", "categories", "collectives", "source_codebase",
                  "world_sizes", "version", "solved", "url"]

    def get_version(self, obj: Problem) -> str | None:
        v = next((v for v in obj.versions.all() if v.is_current), None)
        return v.version if v else None

    def get_url(self, obj: Problem) -> str:
        return f"/api/v1/problems/{obj.slug}/"


class ProblemDetailSerializer(ProblemListSerializer):
    description = serializers.SerializerMethodField()
    source = serializers.SerializerMethodField()
    tags = serializers.ListField(child=serializers.CharField())
    source_function = serializers.CharField()
    source_url = serializers.CharField()
    current = serializers.SerializerMethodField()
    versions = VersionSerializer(many=True)

    class Meta(ProblemListSerializer.Meta):
        fields = ProblemListSerializer.Meta.fields + [
            "description", "tags", "source", "source_function", "source_url", "current", "versions"]

    def _current(self, obj: Problem) -> ProblemVersion | None:
        return next((v for v in obj.versions.all() if v.is_current), None)

    def get_description(self, obj: Problem) -> str:
        v = self._current(obj)
        return v.description if v else ""

    def get_source(self, obj: Problem) -> dict[str, str]:
        return {"codebase": obj.source_codebase, "function": obj.source_function,
                "url": obj.source_url}

    def get_current(self, obj: Problem) -> dict[str, Any] | None:
        v = self._current(obj)
        if v is None:
            return None
        return {"version": v.version, "signature": v.signature, "reference_source": v.source_text,
                **{k: v.details.get(k) for k in ("sizes", "dtypes", "tolerances", "world_size_note",
                                                  "may_overwrite", "shapes", "traffic", "process_groups")}}


class HardwareSerializer(serializers.ModelSerializer):
    queue = serializers.CharField(read_only=True)
    device = serializers.CharField(read_only=True)
    size = serializers.CharField(read_only=True)
    roofline = serializers.JSONField(read_only=True)

    class Meta:
        model = Hardware
        fields = ["slug", "name", "kind", "gpus", "world_size", "device", "size", "queue",
                  "builtin", "roofline"]


class HardwareDetailSerializer(HardwareSerializer):
    class Meta(HardwareSerializer.Meta):
        fields = HardwareSerializer.Meta.fields + ["profile"]


class SubmitSerializer(serializers.Serializer):
    """Multipart with a file in ``source``, or JSON with the text in ``source``."""

    problem = serializers.CharField(max_length=100)
    hardware = serializers.CharField(max_length=100)
    backend = serializers.ChoiceField(choices=[b for b, _ in BACKENDS if b != "reference"],
                                      default="torch")
    model = serializers.CharField(max_length=100, default="human")
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    source = serializers.JSONField(help_text="file (multipart) or UTF-8 text (JSON)")


class SubmissionSerializer(serializers.ModelSerializer):
    problem = serializers.CharField(source="problem_version.problem.slug")
    problem_version = serializers.CharField(source="problem_version.version")
    hardware = serializers.CharField(source="hardware.slug")
    model = serializers.CharField(source="model.name")
    provider = serializers.CharField(source="model.provider")
    user = serializers.CharField(source="user.username")
    queue_position = serializers.IntegerField(read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = ["id", "url", "user", "model", "provider", "attempt", "problem", "problem_version",
                  "hardware", "backend", "world_size", "size", "dtype", "origin", "status",
                  "status_reason", "progress", "queue_position", "verdict", "failure_class", "speedup",
                  "speedup_low", "speedup_high", "candidate_ms", "reference_ms", "roofline_fraction",
                  "created_at", "started_at", "compiling_at", "running_at", "finished_at", "source_sha256"]

    def get_url(self, obj: Submission) -> str:
        return f"/api/v1/submissions/{obj.pk}/"

    def to_representation(self, obj: Submission) -> dict[str, Any]:
        data = super().to_representation(obj)
        data["queue_position"] = obj.queue_position()
        if obj.is_pending and not data["status_reason"]:
            data["status_reason"] = overdue_reason(obj)  # read-only: the reaper does the failing
        return data


class SubmissionDetailSerializer(SubmissionSerializer):
    report = serializers.JSONField()
    source = serializers.SerializerMethodField()

    class Meta(SubmissionSerializer.Meta):
        fields = SubmissionSerializer.Meta.fields + ["source", "report"]

    def get_source(self, obj: Submission) -> str | None:
        request = self.context.get("request")
        return obj.source if request and obj.visible_source_to(request.user) else None


class WorkerStatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["compiling", "running"])
    step = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                 help_text='the latest step, e.g. "candidate: trial 2 of 5"')
    worker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class WorkerReportSerializer(serializers.Serializer):
    report = serializers.JSONField(required=False)
    error = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    output = serializers.CharField(required=False, allow_blank=True, default="")
    worker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        report = attrs.get("report")
        if report is None and not attrs.get("error"):
            raise serializers.ValidationError("send either a report or an error")
        if report is not None and not (isinstance(report, dict) and report.get("verdict") in ("pass", "fail")):
            raise serializers.ValidationError({"report": "not an evaluator report (verdict pass|fail)"})
        if report is not None and (problem := schema_error(report)) is not None:
            raise serializers.ValidationError(
                {"report": f"does not match the evaluator's report schema (evaluator/report.schema.json) at {problem}"})
        return attrs
