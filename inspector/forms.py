"""The operators' forms: every action asks why; replay may edit the step's input; send takes a body."""

from __future__ import annotations

import json

from django import forms

from workflows.api_parser import JsonTooDeep, parse_json

WHY_HELP = "Written to the audit log with your user name."


class WhyForm(forms.Form):
    why = forms.CharField(
        label="Why",
        max_length=2000,
        help_text=WHY_HELP,
        widget=forms.Textarea(
            attrs={"rows": 2, "cols": 80, "placeholder": "e.g. provider outage fixed (INC-123)"}
        ),
    )

    def clean_why(self) -> str:
        why = self.cleaned_data["why"].strip()
        if not why:
            raise forms.ValidationError("Say why: it goes to the audit log.")
        return why


class JSONText(forms.CharField):
    """A JSON document typed into a textarea; cleans to the parsed value."""

    widget = forms.Textarea(attrs={"rows": 8, "cols": 80, "class": "wf-mono", "spellcheck": "false"})

    def clean(self, value):
        text = super().clean(value)
        if text is None or not str(text).strip():
            return None
        try:
            return parse_json(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        except JsonTooDeep as exc:
            raise forms.ValidationError(f"Not accepted: {exc}.") from None


class ReplayForm(WhyForm):
    edit_input = forms.BooleanField(required=False, label="Rerun the step with an edited input")
    input = JSONText(required=False, label="Input (JSON)")


class SendForm(WhyForm):
    queue = forms.ChoiceField(label="Queue")
    body = JSONText(required=False, label="Body (JSON)", help_text="Empty sends null.")
    confirmed = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, queues: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["queue"].choices = [(q, q) for q in queues]
