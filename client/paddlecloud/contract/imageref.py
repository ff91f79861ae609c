"""Container image references (the distribution/reference grammar) and which registry login may push one.

Shared by the portal (POST /images, a job's `image`) and paddlectl, so both refuse the same names with
the same message. Only pure string rules here: no network, no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_REFERENCE = 300  # the whole reference; the grammar's own limit on the name is 255
MAX_NAME = 255
DOCKER_HUB = "docker.io"
_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io"}

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]{{1,5}})?$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-fA-F0-9]{32,}$")
_SERVER = re.compile(r"^(?:https?://)?(?P<host>[^/]+)(?P<path>/[^?#]*)?$")


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference: `domain` ("docker.io" when none was written), `path`, and a tag and/or digest."""

    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    def __str__(self) -> str:
        text = f"{self.domain}/{self.path}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


class BadReference(ValueError):
    """The text is not an image reference; the message names the rule broken."""


def _split_domain(name: str) -> tuple[str, str]:
    first, _, rest = name.partition("/")
    # As docker decides: the first component is a registry host when it looks like one.
    if rest and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        return first, rest
    return DOCKER_HUB, name


def _split_tag(rest: str) -> tuple[str, str]:
    """`name[:tag]` -> (name, tag); a ':' before the last '/' is a registry port, not a tag."""
    colon = rest.rfind(":")
    if colon <= rest.rfind("/"):
        return rest, ""
    name, tag = rest[:colon], rest[colon + 1 :]
    if not _TAG.match(tag):
        raise BadReference(f"tag {tag[:80]!r} must be 1-128 of A-Z a-z 0-9 _ . - and not start with . or -")
    return name, tag


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text:
        raise BadReference("an image reference such as registry.example.com/team/model:1.0 is required")
    if len(text) > MAX_REFERENCE:
        raise BadReference(f"is {len(text)} characters long; the limit is {MAX_REFERENCE}")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise BadReference("must not contain spaces or control characters")


def parse_image(text: str) -> ImageRef:
    """Parse `[host[:port]/]path[:tag][@digest]`; BadReference names what is wrong."""
    _check_text(text)
    rest, at, digest = text.partition("@")
    if at and not _DIGEST.match(digest):
        raise BadReference(f"digest {digest[:80]!r} is not algorithm:hex (e.g. sha256:<64 hex digits>)")
    name, tag = _split_tag(rest)
    if len(name) > MAX_NAME:
        raise BadReference(f"the name is {len(name)} characters long; the limit is {MAX_NAME}")
    domain, path = _split_domain(name)
    if not _DOMAIN.match(domain):
        raise BadReference(f"registry host {domain[:80]!r} is not host[:port]")
    for component in path.split("/"):
        if not _PATH_COMPONENT.match(component):
            raise BadReference(
                f"path component {component[:80]!r} must be lowercase letters and digits, "
                "separated by '.', '_', '__' or '-'"
            )
    return ImageRef(domain=_hub(domain), path=path, tag=tag, digest=digest)


def image_problem(text: str) -> str | None:
    """What is wrong with an image reference, or None."""
    try:
        parse_image(text)
    except BadReference as exc:
        return str(exc)
    return None


def _hub(host: str) -> str:
    return DOCKER_HUB if host.lower() in _HUB_ALIASES else host.lower()


def server_scope(server: str) -> tuple[str, str]:
    """(host[:port], path prefix) of a registry login's server, as `docker login` was given it."""
    match = _SERVER.match(server.strip())
    if not match:
        return server.strip().lower(), ""
    path = (match.group("path") or "").strip("/")
    if _hub(match.group("host")) == DOCKER_HUB and path in ("v1", "v2"):
        path = ""  # https://index.docker.io/v1/ is Docker Hub's login address, not a namespace
    return _hub(match.group("host")), path


def push_problem(image: ImageRef, server: str) -> str | None:
    """Why a login for `server` may not be used to push `image`, or None.

    The rule: the image must be on the login's registry host, and when the login names a path
    (registry.example.com/alice) the image must be under it; a digest is the push's result, never its
    destination. What the login may push beyond that, the registry itself decides with its own access
    control.
    """
    if image.digest:
        return "must not name a digest (@sha256:...): the push makes the digest; give a tag or none"
    host, prefix = server_scope(server)
    if image.domain != host:
        return f"is on {image.domain}, but the registry secret logs in to {host}; push to {host}/..."
    if prefix and not (image.path == prefix or image.path.startswith(prefix + "/")):
        return f"must be under {host}/{prefix}/ (the registry secret's server)"
    return None
