"""Read serializers per resource, and write serializers per action."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.lib import sweeps
from portal.lib.reports import (mapping, schema_error, sweep_without_source_quotes, without_nul,
                                without_source_quotes)
from portal.submissions.models import BACKENDS, Submission
from portal.submissions.lifecycle import overdue_reason
from portal.submissions.workers import liveness


def absolute(context: dict[str, Any], path: str) -> str:
    """Links are absolute, like the pagination's ``next`` and ``previous``: a client follows them as
    they are. Without a request (a serializer used outside a view) the path is all there is."""
    request = context.get("request")
    return request.build_absolute_uri(path) if request is not None else path


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
    solved = serializers.BooleanField(
        read_only=True, help_text="a model other than the reference has a passing submission "
                                  "(on `hardware` where the request names one)")

    class Meta:
        model = Problem
        fields = ["id", "slug", "title", "categories", "collectives", "source_codebase",
                  "world_sizes", "version", "solved", "url"]

    def get_version(self, obj: Problem) -> str | None:
        v = next((v for v in obj.versions.all() if v.is_current), None)
        return v.version if v else None

    def get_url(self, obj: Problem) -> str:
        return absolute(self.context, f"/api/v1/problems/{obj.slug}/")


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
                                                  "may_overwrite", "shapes", "traffic", "process_groups",
                                                  "sweep")}}


class HardwareSerializer(serializers.ModelSerializer):
    queue = serializers.CharField(read_only=True)
    device = serializers.CharField(read_only=True)
    size = serializers.CharField(read_only=True)
    roofline = serializers.JSONField(read_only=True)
    live_workers = serializers.SerializerMethodField(
        help_text="workers consuming its queue now (asked of the workers, cached for a few "
                  "seconds); null when the broker did not answer")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Hardware
        fields = ["slug", "name", "kind", "gpus", "world_size", "device", "size", "queue",
                  "builtin", "roofline", "live_workers", "url"]

    def get_live_workers(self, obj: Hardware) -> int | None:
        return liveness().count(obj.queue)

    def get_url(self, obj: Hardware) -> str:
        return absolute(self.context, f"/api/v1/hardware/{obj.slug}/")


class HardwareDetailSerializer(HardwareSerializer):
    class Meta(HardwareSerializer.Meta):
        fields = HardwareSerializer.Meta.fields + ["profile"]


class SubmitSerializer(serializers.Serializer):
    """Multipart with a file in ``source``, or JSON with the text in ``source``."""

    problem = serializers.CharField(max_length=100)
    hardware = serializers.CharField(
        max_length=100, required=False, allow_blank=True, default="",
        help_text="may be omitted where one choice is obvious: the only hardware the problem runs "
                  "on that a live worker serves, or the only hardware it runs on at all")
    backend = serializers.ChoiceField(
        choices=[b for b, _ in BACKENDS if b != "reference"], default="torch",
        error_messages={"invalid_choice": '"{input}" is not one of torch, triton, cuda.'})
    # blank passes here so that the service's model-name rule answers (bad_model_name)
    model = serializers.CharField(max_length=100, default="human", allow_blank=True)
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    source = serializers.JSONField(help_text="file (multipart) or UTF-8 text (JSON)")
    sweep = serializers.BooleanField(default=False, help_text=(
        "also run a message-size sweep after a passing evaluation (docs/sweeps.md); only for problems "
        "with a sweep axis"))


class SubmissionSerializer(serializers.ModelSerializer):
    problem = serializers.CharField(source="problem_version.problem.slug")
    problem_version = serializers.CharField(source="problem_version.version")
    hardware = serializers.CharField(source="hardware.slug")
    model = serializers.CharField(source="model.name")
    provider = serializers.SerializerMethodField(help_text="the model's provider; empty for a "
                                                 "person's upload under `human`")
    credited_to = serializers.CharField(source="credit", read_only=True, help_text=(
        "who the result is credited to: the uploading user for `human`, else the provider"))
    user = serializers.CharField(source="user.username")
    queue_position = serializers.IntegerField(read_only=True)
    url = serializers.SerializerMethodField()
    dtype = serializers.SerializerMethodField(
        help_text="the dtype it ran in; blank only before it ran, when it means the problem's default")

    class Meta:
        model = Submission
        fields = ["id", "url", "user", "model", "provider", "credited_to", "attempt", "problem", "problem_version",
                  "hardware", "backend", "world_size", "size", "dtype", "origin", "status",
                  "status_reason", "progress", "queue_position", "verdict", "failure_class", "speedup",
                  "speedup_low", "speedup_high", "candidate_ms", "reference_ms", "roofline_fraction",
                  "created_at", "started_at", "compiling_at", "running_at", "finished_at", "source_sha256",
                  "sweep_status", "sweep_reason", "sweep_finished_at"]

    def get_url(self, obj: Submission) -> str:
        return absolute(self.context, f"/api/v1/submissions/{obj.pk}/")

    def get_provider(self, obj: Submission) -> str:
        return "" if obj.model.kind == "human" and obj.origin in ("upload", "api") else obj.model.provider

    def get_dtype(self, obj: Submission) -> str:
        return obj.dtype or str(mapping(obj.report, "setting").get("dtype") or "")

    def to_representation(self, obj: Submission) -> dict[str, Any]:
        data = super().to_representation(obj)
        data["queue_position"] = obj.queue_position()
        if obj.is_pending and not data["status_reason"]:
            data["status_reason"] = overdue_reason(obj)  # read-only: the reaper does the failing
        return data


class SubmissionDetailSerializer(SubmissionSerializer):
    report = serializers.JSONField()
    sweep = serializers.JSONField(help_text="the sweep report (evaluator/sweep.schema.json), once finished")
    source = serializers.SerializerMethodField()

    class Meta(SubmissionSerializer.Meta):
        fields = SubmissionSerializer.Meta.fields + ["source", "report", "sweep"]

    def get_source(self, obj: Submission) -> str | None:
        request = self.context.get("request")
        return obj.source if request and obj.visible_source_to(request.user) else None

    def to_representation(self, obj: Submission) -> dict[str, Any]:
        data = super().to_representation(obj)
        data["sweep"] = sweeps.as_shown(data["sweep"])  # an older sweep's pass with sizes not run: incomplete
        request = self.context.get("request")
        if request is None or not obj.visible_source_to(request.user):
            data["report"] = without_source_quotes(data["report"])  # its failure quotes the source
            data["sweep"] = sweep_without_source_quotes(data["sweep"])
        return data


class WorkerBodySerializer(serializers.Serializer):
    """What a worker posts carries the candidate's own text (its exception, its output, the
    steps its ranks name), and PostgreSQL's text and jsonb cannot hold U+0000 or a lone
    surrogate: each becomes U+FFFD before anything is checked or stored, so a candidate's text
    can neither get the worker's post refused nor fail the save of its verdict (a 500 there
    held the worker in its retries and left the job to the reaper, uncounted)."""

    def to_internal_value(self, data: Any) -> Any:
        return super().to_internal_value(without_nul(data))


class WorkerStatusSerializer(WorkerBodySerializer):
    status = serializers.ChoiceField(choices=["compiling", "running"])
    step = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                 help_text='the latest step, e.g. "candidate: trial 2 of 5"')
    worker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class WorkerResultSerializer(WorkerBodySerializer):
    """A worker's result: a document, or an error with the run's output tail."""

    error = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    output = serializers.CharField(required=False, allow_blank=True, default="")
    worker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    def failure_reason(self) -> str:
        data = self.validated_data
        return data["error"] + (f"\n\nOutput:\n{data['output'][-3000:]}" if data["output"] else "")


class WorkerReportSerializer(WorkerResultSerializer):
    report = serializers.JSONField(required=False)

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


class WorkerSweepSerializer(WorkerResultSerializer):
    sweep = serializers.JSONField(required=False, help_text="the `pkb sweep` report")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        sweep = attrs.get("sweep")
        if sweep is None and not attrs.get("error"):
            raise serializers.ValidationError("send either a sweep report or an error")
        if sweep is not None and not (isinstance(sweep, dict) and sweep.get("schema") == "pkb-sweep"):
            raise serializers.ValidationError({"sweep": "not a sweep report (schema: pkb-sweep)"})
        return attrs
