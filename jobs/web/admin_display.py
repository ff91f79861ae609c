"""Readable HTML of a job for the admin: its JSON (spec, engine data) as nested key/value tables; links to its pages."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.models import Job

MAX_DEPTH = 6  # deeper than any spec or engine data we write: what is below is shown as JSON text
MAX_ROWS = 1000  # rows in all, so a wide and deep value cannot make a page of millions of cells
MAX_TEXT = 2000  # characters of one value; an entry or env value longer than this is cut, its length said


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}… ({len(text)} characters)"


class _Table:
    """One value's tables, drawing rows from one budget of MAX_ROWS."""

    def __init__(self) -> None:
        self.left = MAX_ROWS

    def html(self, value: Any, depth: int) -> SafeString:
        if isinstance(value, dict | list) and not value:
            return format_html('<span class="muted">{}</span>', "(empty)")
        if depth >= MAX_DEPTH or not isinstance(value, dict | list):
            return format_html('<span class="json-value">{}</span>', _text(value))
        pairs = list(value.items()) if isinstance(value, dict) else [(f"[{i}]", v) for i, v in enumerate(value)]
        shown = pairs[: max(self.left, 0)]
        self.left -= len(shown)
        rows = format_html_join("", '<tr><th scope="row">{}</th><td>{}</td></tr>',
                                [(key, self.html(item, depth + 1)) for key, item in shown])
        more = len(pairs) - len(shown)
        tail = format_html('<tr><td colspan="2" class="muted">… {} more not shown</td></tr>', more) if more else ""
        return format_html('<table class="json-table">{}{}</table>', rows, tail)


def json_table(value: Any) -> SafeString:
    """`value` as HTML: a mapping a table of key/value rows, a list one row per item, a scalar its text."""
    return _Table().html(value, 0)


def links(job: Job) -> SafeString:
    """The job's page, and each worker's log in the page's viewer and as a download."""
    viewer = reverse("job-logs", args=[job.uid])
    rows = format_html_join("", '<li>{}: <a href="{}?worker={}">view log</a>, <a href="{}">download</a></li>', (
        (name, viewer, name, reverse("job-log-download", args=[job.uid, name])) for name in job.worker_names
    ))  # fmt: skip
    page = reverse("job-detail", args=[job.uid])
    return format_html('<a href="{}">Job page</a><ul class="job-log-links">{}</ul>', page, rows)
