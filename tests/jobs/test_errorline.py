"""The rule that finds a failed worker's error line in its log's tail (jobs.files.errorline): plain unit tests."""

from __future__ import annotations

from jobs.files import errorline

TRACEBACK = """\
=== attempt started 2026-01-01T00:00:00Z (trainer 0, host h) ===
step 1 loss 3.0
Traceback (most recent call last):
  File "/pfs/local/home/alice/jobs/fit/train.py", line 9, in <module>
    raise ValueError("bad learning rate 7")
ValueError: bad learning rate 7
[paddlecloud-launch] entry exited with code 1 after 0.4s
"""


def test_the_last_line_of_a_traceback_wins_over_the_launchers_own_lines() -> None:
    assert errorline.reason(TRACEBACK) == "ValueError: bad learning rate 7"


def test_python_refusing_a_missing_script_and_a_shell_missing_a_command() -> None:
    missing = "python: can't open file '/pfs/x/missing.py': [Errno 2] No such file or directory\n"
    assert errorline.last_error_line(missing) == missing.strip()
    assert errorline.last_error_line("/bin/sh: 1: pythn: not found\n") == "/bin/sh: 1: pythn: not found"
    assert errorline.last_error_line("train.py: error: the following arguments are required: --lr\n")


def test_the_launchers_error_line_is_quoted_without_its_prefix() -> None:
    tail = "[paddlecloud-launch] error: installing requirements failed: ERROR: no such file\n"
    assert errorline.reason(tail) == "installing requirements failed: ERROR: no such file"


def test_only_the_newest_attempt_counts_and_a_plain_last_line_is_the_fallback() -> None:
    tail = TRACEBACK + "=== attempt started 2026-01-01T00:01:00Z (trainer 0, host h) ===\ngiving up\n"
    assert errorline.last_error_line(tail) == ""
    assert errorline.reason(tail) == "giving up"
    assert errorline.reason("") == "" and errorline.reason("[paddlecloud] pserver 0 stopped\n") == ""


def test_paddles_own_error_summary_line_is_found() -> None:
    tail = "Error Message Summary:\n----------------------\nInvalidArgumentError: shape [3] != [4] (at x.cc:1)\n\n"
    assert errorline.reason(tail) == "InvalidArgumentError: shape [3] != [4] (at x.cc:1)"


def test_control_characters_are_escaped_and_the_line_is_bounded() -> None:
    tail = "ValueError: \x1b[31mred\x1b[0m\tx" + "y" * 1000 + "\n"
    found = errorline.reason(tail)
    assert "\x1b" not in found and "\\x1b[31mred" in found and "\t" not in found
    assert len(found) == errorline.MAX_REASON and found.endswith("...")
