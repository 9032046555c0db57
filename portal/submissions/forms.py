from __future__ import annotations

from django import forms

from portal.catalog.models import Hardware, Problem

from .models import BACKENDS


class UploadForm(forms.Form):
    problem = forms.ChoiceField()
    hardware = forms.ChoiceField()
    backend = forms.ChoiceField(choices=[b for b in BACKENDS if b[0] != "reference"])
    model = forms.CharField(max_length=100, initial="human",
                            help_text='The model that wrote the kernel; "human" for people.')
    provider = forms.CharField(max_length=100, required=False)
    source = forms.FileField(help_text="A Python file defining solution(...).")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["problem"].choices = [
            (p.slug, f"{p.number} {p.title}") for p in Problem.objects.active()]
        self.fields["hardware"].choices = [
            (h.slug, f"{h.name} ({h.slug})") for h in Hardware.objects.active()]
