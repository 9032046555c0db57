from __future__ import annotations

from django import forms

from portal.catalog.models import Hardware, Problem

from .models import BACKENDS
from .workers import liveness


class UploadForm(forms.Form):
    problem = forms.ChoiceField()
    hardware = forms.ChoiceField()
    backend = forms.ChoiceField(choices=[b for b in BACKENDS if b[0] != "reference"])
    model = forms.CharField(max_length=100, initial="human",
                            help_text='The model that wrote the kernel; "human" for people.')
    provider = forms.CharField(max_length=100, required=False)
    source = forms.FileField(help_text="A Python file defining solution(...).")
    sweep = forms.BooleanField(required=False, label="Also sweep message sizes",
                               help_text="After a passing evaluation, time the kernel against the reference "
                                         "over a range of message sizes (4 KiB to 256 MiB on GPUs) and plot "
                                         "bus bandwidth and speedup per size. Only problems with a sweep axis.")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["problem"].choices = [
            (p.slug, f"{p.number} {p.title}") for p in Problem.objects.active()]
        state = liveness()
        self.fields["hardware"].choices = [
            (h.slug, f"{h.name} ({h.slug}){_worker_note(state.count(h.queue))}")
            for h in Hardware.objects.active()]


def _worker_note(live: int | None) -> str:
    """Said beside each hardware choice: an upload to hardware no worker serves is refused."""
    if live is None:
        return ""
    return f" · {live} live worker{'s' if live != 1 else ''}" if live else " · no worker: refused now"
