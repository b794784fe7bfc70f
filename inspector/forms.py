"""The operators' forms: every action asks why; replay may edit the step's input; send takes a body;
a decision takes one of the declared choices and a note. What the engine refuses reads as a
sentence (`refusal_text`), never as a Python repr."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from workflows.core.exceptions import InvalidMessage, WorkflowError
from workflows.http.parser import JsonTooDeep, parse_json

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
    wait_for_new = forms.BooleanField(
        required=False, label="Wait for new messages instead (do not deliver the consumed ones again)"
    )


class ForkForm(WhyForm):
    edit_input = forms.BooleanField(required=False, label="Run the step with an edited input")
    input = JSONText(required=False, label="Input (JSON)")
    key = forms.CharField(
        required=False,
        max_length=2000,
        label="Key of the new run",
        help_text='Empty: derived from this run\'s (…~fork-N). One string, or a JSON list such as ["job-7", "b"].',
    )

    def clean_key(self) -> list[str] | None:
        text = self.cleaned_data["key"].strip()
        if not text:
            return None
        if not text.startswith("["):
            return [text]
        try:
            key = parse_json(text)
        except (json.JSONDecodeError, JsonTooDeep):
            raise forms.ValidationError(
                "Not valid JSON: give one string, or a JSON list of strings."
            ) from None
        if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
            raise forms.ValidationError("A key is a non-empty list of strings.")
        return key


class SendForm(WhyForm):
    queue = forms.ChoiceField(label="Queue")
    body = JSONText(required=False, label="Body (JSON)", help_text="Empty sends null.")
    confirmed = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, queues: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["queue"].choices = [(q, q) for q in queues]


NOTE_CHARS = 20_000  # what the form takes at most; the queue's schema may allow less


class DecisionForm(forms.Form):
    """One of a decision queue's declared choices (the button pressed) and, when the queue takes
    one, a note. Who decides is never a field: it is the signed-in operator."""

    choice = forms.ChoiceField(
        error_messages={
            "required": "Choose one of the buttons.",
            "invalid_choice": "“%(value)s” is not one of the choices.",
        }
    )
    note = forms.CharField(
        required=False,
        max_length=NOTE_CHARS,
        label="Note",
        help_text="Sent with your decision and written to the audit log with your user name.",
        widget=forms.Textarea(
            attrs={"rows": 3, "cols": 80, "placeholder": "e.g. checked the figures with finance"}
        ),
    )

    def __init__(self, *args: Any, choices: list[str], takes_note: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["choice"].choices = [(c, c) for c in choices]
        if not takes_note:
            del self.fields["note"]

    def clean_note(self) -> str:
        return self.cleaned_data["note"].strip()


def _location(loc: Any) -> str:
    parts = [str(p) for p in (loc or ()) if p not in ("body", "__root__")]
    return ".".join(parts)


def refusal_text(exc: WorkflowError) -> str:
    """What the engine refused, as a sentence: a message its queue's schema rejects lists each
    field and what is wrong with it ("note: String should have at most 2000 characters")."""
    if isinstance(exc, InvalidMessage):
        detail = exc.detail
        if isinstance(detail, list) and detail and all(isinstance(e, dict) for e in detail):
            problems = []
            for error in detail:
                where = _location(error.get("loc"))
                message = str(error.get("msg") or "is not valid")
                problems.append(f"{where}: {message}" if where else message)
            return f"The queue does not accept this message: {'; '.join(problems)}."
        return f"The queue does not accept this message: {str(detail).rstrip('.')}."
    return str(exc)
