"""One line of a worker's metrics file (layout.METRICS_NAME): the rules of its step, names and values.

The in-job writer (paddlecloud.runtime.metrics) drops what breaks them; the portal (jobs.follow.metrics)
checks every line again when it reads the file, since job code may write the file by hand.
A line: ``{"step": 10, "time": 1712345678.123, "values": {"loss": 0.25}}``; a line may also carry
``"total_steps": 1000`` (the job's progress, jobs.follow.progress), and then its values may be empty.
"""

from __future__ import annotations

import math
import numbers

MAX_NAME = 64  # characters in a metric's name
MAX_VALUES = 32  # metrics in one line
MAX_STEP = 2**53  # steps stay exact in JavaScript's numbers


def valid_name(name: object) -> bool:
    """A metric name: 1 to 64 printable characters (the portal shows it as text, whatever it holds)."""
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME and name.isprintable()


def valid_value(value: object) -> bool:
    """A finite real number; booleans are not numbers here."""
    if type(value) is float:  # what JSON gives: the fast path (the portal checks every point of every curve)
        return math.isfinite(value)
    if type(value) is int:
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def valid_step(step: object) -> bool:
    if type(step) is int:  # what JSON gives: the fast path, as above
        return 0 <= step < MAX_STEP
    return isinstance(step, numbers.Integral) and not isinstance(step, bool) and 0 <= int(step) < MAX_STEP


def valid_total(total: object) -> bool:
    """A job's total steps: a whole number from 1 (a total of 0 or less would make progress meaningless)."""
    return isinstance(total, numbers.Integral) and not isinstance(total, bool) and 0 < int(total) < MAX_STEP
