"""The page forms of jobs: list filters, and the submit form whose rules are the API's (jobs.services).

The submit form keeps every field as text and hands it to `services.submit`/`dry_run` unchanged, so
the browser gets the same checks and the same messages as `POST /api/v1/jobs`; the only rule of its
own is how the env text area is split into NAME=value lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django import forms
from paddlecloud.contract import spec as rules

from jobs.models import JobState
from jobs.scheduling import priorities as priority_classes
from jobs.scheduling.priorities import DEFAULT as DEFAULT_PRIORITY
from jobs.web import listing

MAX_SEARCH = 40  # a job name is at most 40 characters
MAX_ENV_TEXT = 64 * 1024
MAX_AFTER_TEXT = 1000  # room for predecessors.MAX_AFTER names with their conditions


class JobFilterForm(forms.Form):
    """`/jobs/?state=&datacenter=&q=&owner=&since=&until=&sort=`: bounded, and a bad value is a message, not a 500."""

    state = forms.ChoiceField(choices=[("", "any state"), ("active", "active"), *JobState.choices], required=False)
    datacenter = forms.CharField(max_length=40, required=False)
    q = forms.CharField(max_length=MAX_SEARCH, required=False, label="Name contains")
    owner = forms.CharField(max_length=150, required=False)
    since = forms.DateField(required=False, label="Submitted from", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="to", widget=forms.DateInput(attrs={"type": "date"}))
    sort = forms.ChoiceField(choices=listing.SORT_CHOICES, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "must be on or after 'Submitted from'")
        return data


def _text(label: str = "", *, max_length: int = 200, help_text: str = "", required: bool = False) -> forms.CharField:
    return forms.CharField(label=label or None, max_length=max_length, required=required, help_text=help_text)


class SubmitForm(forms.Form):
    """Every field of the job spec (jobs.spec.JobSpecSerializer), as text; the API's rules check them."""

    jobname = _text("Job name", max_length=200, required=True, help_text="a DNS label, at most 40 characters")
    datacenter = forms.ChoiceField(choices=[], required=False)
    package = _text(
        max_length=rules.MAX_PACKAGE,
        help_text="a folder of your PFS home; empty: /pfs/<datacenter>/home/<you>/jobs/<job name>",
    )
    entry = _text(max_length=rules.MAX_ENTRY, required=True, help_text="the command each trainer runs")
    parallelism = _text("Trainers", max_length=12, help_text=f"default {rules.DEFAULTS.get('parallelism', 1)}")
    pservers = _text("Parameter servers", max_length=12, help_text="0: collective mode")
    cpu = _text("CPU per trainer", max_length=40, help_text=f"default {rules.DEFAULTS['cpu']}")
    memory = _text("Memory per trainer", max_length=40, help_text=f"default {rules.DEFAULTS['memory']}")
    gpu = _text("GPUs per trainer", max_length=12)
    pscpu = _text("CPU per pserver", max_length=40, help_text=f"default {rules.DEFAULTS['pscpu']}")
    psmemory = _text("Memory per pserver", max_length=40, help_text=f"default {rules.DEFAULTS['psmemory']}")
    passes = _text(max_length=12)
    image = _text(max_length=rules.MAX_IMAGE, help_text="a runtime name (local engine) or an image")
    registry = forms.ChoiceField(choices=[], required=False, help_text="a registry secret of yours, to pull the image")
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=MAX_ENV_TEXT,
        help_text="one NAME=value a line",
    )
    params = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=MAX_ENV_TEXT,
        help_text="hyperparameters, one name=value a line (true/false, a number or text): paddlecloud.params()",
    )
    priority = forms.ChoiceField(
        choices=[], required=False, help_text="who starts first when the datacenter is full",
    )
    max_retries = _text("Retries per trainer", max_length=12)
    pending_timeout = _text("Pending timeout (s)", max_length=12)
    # paddlectl's -notify syntax, so the page, the CLI and the docs say one thing; empty: the profile's default.
    notify = _text(
        "Notify when it ends", max_length=rules.MAX_WEBHOOK_URL + 20,
        help_text="email, webhook=URL, email,webhook=URL or none; empty: your default (Profile, Notifications)",
    )
    stall_timeout = _text(
        "Stall timeout (s)", max_length=12, help_text="no trainer log line for this long: Stalled; empty: the default"
    )
    stall_action = forms.ChoiceField(
        choices=[(action, action) for action in rules.STALL_ACTIONS], required=False,
        help_text="warn: a warning and an event; fail: the job fails (Stalled)",
    )  # fmt: skip
    # paddlectl's -after and -resume-from, in their words; the API's rules (contract.predecessors) check them.
    after = _text(
        "Start after", max_length=MAX_AFTER_TEXT,
        help_text="jobs of yours, NAME or NAME:ok|any|failed, separated by spaces or commas; it waits until they end",
    )
    resume_from = _text(
        "Resume from", max_length=80,
        help_text="JOB or JOB:STEP: start from that run's checkpoint (its latest when no step is given)",
    )

    def __init__(
        self,
        *args: Any,
        datacenters: list[str],
        registries: list[str],
        priorities: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["datacenter"].choices = [(name, name) for name in datacenters]  # type: ignore[attr-defined]
        # The classes the user may use (jobs.scheduling.priorities.usable_by), highest first; `normal` preselected.
        classes = priorities if priorities is not None else [DEFAULT_PRIORITY]
        self.fields["priority"].choices = [(name, name) for name in classes]  # type: ignore[attr-defined]
        self.fields["priority"].initial = DEFAULT_PRIORITY
        self.fields["registry"].choices = [("", "none"), *((n, n) for n in registries)]  # type: ignore[attr-defined]
        self.fields["package"].widget.attrs["list"] = "package-folders"
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("data-testid", f"submit-{name}")

    def payload(self) -> dict[str, Any]:
        """The spec as the API receives it: empty fields left out, so the API's defaults apply."""
        data = {name: value for name, value in self.cleaned_data.items() if value not in ("", None)}
        for field, parse in (("env", _env_line), ("params", _param_line)):
            text = data.pop(field, "")
            if text:
                data[field] = self._lines(field, text, parse)
        if "after" in data:
            data["after"] = [name for name in re.split(r"[\s,]+", data["after"]) if name]
        notify_text = data.pop("notify", "")
        if notify_text:
            try:
                data["notify"] = rules.parse_notify(notify_text)
            except ValueError as exc:
                self.add_error("notify", str(exc))
        return data

    def _lines(self, field: str, text: str, parse: Callable[[str], tuple[str, Any]]) -> dict[str, Any]:
        """A text area of NAME=value lines as a mapping; a line `parse` refuses is an error on `field`."""
        parsed: dict[str, Any] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    name, value = parse(line)
                except ValueError as exc:
                    self.add_error(field, f"line {number}: {exc}")
                    continue
                parsed[name] = value
        return parsed

    def add_api_errors(self, detail: Any) -> None:
        """Put each message of an API error's detail on its field (quota and the like on the form)."""
        if not isinstance(detail, dict):
            self.add_error(None, [str(item) for item in (detail if isinstance(detail, list) else [detail])])
            return
        for field, problems in detail.items():
            messages = [str(p) for p in _flatten(problems)]
            self.add_error(
                field if field in self.fields else None,
                [f"{field}: {m}" for m in messages] if field not in self.fields else messages,
            )


def _env_line(line: str) -> tuple[str, str]:
    name, sep, value = line.partition("=")
    if not sep:
        raise ValueError("NAME=value expected")
    return name.strip(), value


def _param_line(line: str) -> tuple[str, rules.ParamValue]:
    return rules.parse_param(line.strip())


def priority_names(user: Any) -> list[str]:
    """The priority classes `user` may submit with, highest first: the submit form's choices."""
    return list(priority_classes.usable_by(user).order_by("-value", "name").values_list("name", flat=True))


def _flatten(problems: Any) -> list[Any]:
    if isinstance(problems, dict):
        return [f"{key}: {item}" for key, value in problems.items() for item in _flatten(value)]
    if isinstance(problems, list):
        return [item for value in problems for item in _flatten(value)]
    return [problems]


def initial_from_spec(spec: dict[str, Any], with_env_values: bool) -> dict[str, Any]:
    """The form's fields from a job's spec (clone); env values only for the job's own owner."""
    initial = {
        key: value for key, value in spec.items() if key not in ("env", "notify", "params") and value is not None
    }
    params = spec.get("params") or {}
    # By name: PostgreSQL's jsonb keeps no key order, and a clone should read the same on every database.
    initial["params"] = "\n".join(f"{name}={rules.param_text(value)}" for name, value in sorted(params.items()))
    notify = spec.get("notify")
    if isinstance(notify, dict):
        parts = ["email"] if notify.get("email") else []
        parts += [f"webhook={notify['webhook']}"] if notify.get("webhook") else []
        initial["notify"] = ",".join(parts) or "none"
    if isinstance(spec.get("after"), list):
        initial["after"] = " ".join(str(item) for item in spec["after"])
    env = spec.get("env") or {}
    initial["env"] = "\n".join(f"{name}={value if with_env_values else ''}" for name, value in env.items())
    return initial
