"""urllib3's Retry with paddlectl's waits: PADDLECTL_RETRY_WAIT before the first retry, doubling after.

Imported on the first request only (`Session.http`): urllib3 costs `paddlectl --help` ~100 ms.
"""

from __future__ import annotations

from urllib3.util.retry import Retry


class Backoff(Retry):
    """urllib3 retries the first time at once; paddlectl waits `backoff_factor` first, as it always did."""

    def get_backoff_time(self) -> float:
        retries = len(self.history)
        return min(self.backoff_max, self.backoff_factor * 2 ** (retries - 1)) if retries else 0.0
