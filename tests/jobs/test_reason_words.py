"""The job pages' words for a reason code and for how far off a moment is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Reason
from jobs.templatetags.job_tags import from_now, reason_words


@pytest.mark.parametrize(
    ("reason", "state", "words"),
    [("WaitingForCapacity", "queued", "waiting for capacity"), ("OOMKilled", "failed", "OOM killed"),
     ("Killed", "killed", ""), ("", "failed", ""), (None, "queued", ""), ("GPUUnavailable", "", "GPU unavailable"),
     ("PidsLimit", "failed", "pids limit")],
)  # fmt: skip
def test_a_reason_reads_as_words_and_never_repeats_the_state(reason: str | None, state: str, words: str) -> None:
    assert reason_words(reason, state) == words


def test_every_reason_the_portal_gives_reads_as_lower_case_words() -> None:
    for reason in (r for r in Reason if r.value):
        words = reason_words(reason.value)
        assert words and words == words.strip() and "  " not in words
        assert all(word.islower() or word.isupper() or word.isdigit() for word in words.split()), words


def test_a_moment_under_a_minute_away_is_not_about_0_minutes() -> None:
    now = timezone.now()
    assert from_now(now + timedelta(seconds=20)) == "in under a minute"
    assert from_now(now - timedelta(seconds=5)) == "in under a minute"  # already due: the plan moves on
    assert from_now(now + timedelta(minutes=12, seconds=30)) == "in about 12\xa0minutes"
    assert from_now(None) == ""
