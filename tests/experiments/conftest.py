"""Fixtures of the jobs tests the experiments tests share: a real worker, and packages put on the PFS."""

from tests.jobs.conftest import worker

__all__ = ["worker"]
