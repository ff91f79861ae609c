"""Container image references (`registry/name:tag`, `name@sha256:...`): the one grammar every image name meets.

The grammar is the distribution project's (github.com/distribution/reference), less what nobody
types: a domain (host or host:port) only when the first component has a dot or a port or is
`localhost`; lowercase path components; a tag of word characters; a sha256 digest; 255 characters.
"""

from __future__ import annotations

import re

MAX_LENGTH = 255
_HOST = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_HOST}(?:\.{_HOST})*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
REFERENCE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
EXAMPLE = "registry.example.com/team/trainer:1.0"


def reference_problem(text: str) -> str | None:
    """What is wrong with `text` as an image reference, or None when it is one."""
    if not text:
        return f"an image reference is required, e.g. {EXAMPLE}"
    if len(text) > MAX_LENGTH:
        return f"an image reference has at most {MAX_LENGTH} characters (this one has {len(text)})"
    match = REFERENCE.fullmatch(text)
    if match is None:
        return f"{text!r} is not an image reference: write [registry/]name[:tag][@sha256:digest], e.g. {EXAMPLE}"
    domain = match["domain"]
    if domain and "." not in domain and ":" not in domain and domain != "localhost" and domain != domain.lower():
        return f"{text!r}: the name's components are lowercase (a registry has a dot or a port: host:5000/name)"
    return None
