"""Template context shared by every page: signup switch and the portal's version."""

from __future__ import annotations

from typing import Any

import paddlecloud
from django.conf import settings
from django.http import HttpRequest


def site(request: HttpRequest) -> dict[str, Any]:
    return {"signup_enabled": settings.PADDLECLOUD_SIGNUP != "closed", "portal_version": paddlecloud.__version__}
