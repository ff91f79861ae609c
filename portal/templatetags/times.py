"""One time rule for every page: `{{ value|when }}` is a <time> the browser shows in the viewer's zone, named.

The server writes UTC, labelled, so a page without JavaScript still says which zone it means; static/js/portal.js
rewrites each such element into the browser's zone (ISO-style, 24-hour, the zone's short name after it) and puts the
full timestamp with its offset on hover. Relative times ("3 min ago") stay as they are and get the same hover.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# kind -> what is shown: the whole time, the time of day (a job's own timeline), to the minute, the day.
FORMATS = {"second": "%Y-%m-%d %H:%M:%S", "time": "%H:%M:%S", "minute": "%Y-%m-%d %H:%M", "date": "%Y-%m-%d"}


@register.filter
def when(value: datetime | None, kind: str = "second") -> SafeString | str:
    if not isinstance(value, datetime):
        return ""
    utc = value.astimezone(UTC)
    shown = utc.strftime(FORMATS.get(kind, FORMATS["second"]))
    full = utc.strftime(FORMATS["second"])
    return format_html(
        '<time datetime="{}" data-local="{}" title="{} UTC">{} UTC</time>',
        utc.isoformat().replace("+00:00", "Z"), kind if kind in FORMATS else "second", full, shown,
    )
