"""The API's JSON parser: DRF's, with a bound on nesting, so a deep document is a 400, never a crash."""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from core.api import errors

# No request of this API nests deeper than a few levels (a job's env is the deepest: 2).
MAX_DEPTH = 32


def _depth(value: Any) -> int:
    """How deeply containers nest in a parsed document, walked without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def _too_deep() -> exceptions.ParseError:
    return exceptions.ParseError(f"JSON parse error: the document nests deeper than {MAX_DEPTH} levels")


class BoundedJSONParser(JSONParser):
    """JSON of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (413 above) and MAX_DEPTH levels (400 deeper)."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        data = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(data) > limit:
            raise errors.too_large()
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            codecs.lookup(encoding)
            text = data.decode(encoding)
        except (LookupError, UnicodeDecodeError) as exc:
            message = f"JSON parse error: the body is not valid {errors.quote(encoding)} text ({type(exc).__name__})"
            raise exceptions.ParseError(message) from None
        try:
            value = json.loads(text, parse_constant=self._refuse_constant if self.strict else None)
        except RecursionError:
            raise _too_deep() from None
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {str(exc)[:200]}") from None
        if _depth(value) > MAX_DEPTH:
            raise _too_deep()
        return value

    @staticmethod
    def _refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")
