"""The release both sides carry: the portal reports it (GET /api/v1/version), paddlectl sends it (User-Agent)."""

__version__ = "0.1.0"
