"""The API's JSON renderer: DRF's, except that a lone surrogate in text is written escaped instead of failing.

A stranger's input can hold one (JSON's "\\ud800" parses to it), and a 400 names the value it refuses: UTF-8 cannot
encode it, so DRF's renderer raised and the 400 became a 500. Such an answer is written with every non-ASCII
character escaped, as `ensure_ascii` writes JSON: the same document to any JSON reader.
"""

from __future__ import annotations

from typing import Any

from rest_framework import renderers


class _EscapingJSONRenderer(renderers.JSONRenderer):
    ensure_ascii = True


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return _EscapingJSONRenderer().render(data, accepted_media_type, renderer_context)
