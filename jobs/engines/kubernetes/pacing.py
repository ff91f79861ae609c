"""The pace of calls to a cluster: a token bucket per client (per process and cluster).

A token bucket of `PADDLECLOUD_K8S_QPS` calls a second (default 50) with bursts of `PADDLECLOUD_K8S_BURST`
(default 100), kubectl's own choice. The Python client has no limiter of its own, and client-go's default
(5/s, burst 10) would cap a worker at ~1 job start a second (5 calls each); 50/s lets one worker start ~10 jobs
a second, about what a stock controller-manager (20 calls/s per controller) turns into pods, while a burst of
submits or many workers cannot flood the API server (which answers 429, a transient error, past its own limits).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from jobs.engines.base import EngineError

QPS_ENV, BURST_ENV = "PADDLECLOUD_K8S_QPS", "PADDLECLOUD_K8S_BURST"
DEFAULT_QPS, DEFAULT_BURST = 50.0, 100


class RateLimit:
    """A token bucket: `qps` calls a second on average, `burst` at once after a quiet spell.

    `wait()` takes a token, sleeping until one is due; callers in several threads queue in order.
    """

    def __init__(self, qps: float, burst: int, clock: Any = time.monotonic, sleep: Any = time.sleep) -> None:
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._at = clock()

    def wait(self) -> float:
        """Take a token; returns the seconds slept for it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # reserved now: a token owed is paid by the wait below
            delay = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if delay > 0:
            self._sleep(delay)
        return delay


def rate_limit_from_env() -> RateLimit:
    """The pace of a new client: $PADDLECLOUD_K8S_QPS / $PADDLECLOUD_K8S_BURST, else 50 / 100."""
    qps = _bounded(os.environ.get(QPS_ENV, ""), QPS_ENV, DEFAULT_QPS, 1000.0)
    burst = int(_bounded(os.environ.get(BURST_ENV, ""), BURST_ENV, DEFAULT_BURST, 10000.0))
    return RateLimit(qps, max(1, burst))


def _bounded(text: str, variable: str, default: float, most: float) -> float:
    if not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise EngineError(f"{variable}: {text!r} is not a number") from None
    if not 0 < value <= most:
        raise EngineError(f"{variable}: {text!r} must be above 0 and at most {most:g}")
    return value
