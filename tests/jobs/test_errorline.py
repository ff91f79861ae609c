"""The rule that finds a failed worker's error line in its log's tail (jobs.files.errorline): plain unit tests."""

from __future__ import annotations

import pytest

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


GLOO_TIMEOUT = """\
=== attempt started 2026-01-01T00:00:00Z (trainer 0, host h) ===
step 3 loss 0.9
terminate called after throwing an instance of 'gloo::IoException'
  what():  [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read timeout [127.0.0.1]:41234
C++ Traceback (most recent call last):
0   paddle::distributed::ProcessGroupGloo::AllReduce
Error Message Summary:
FatalError: `Process abort signal` is detected by the operating system.
  [SignalInfo: *** SIGABRT (@0x3e8) received by PID 77 ***]
Aborted
[paddlecloud-launch] entry exited with code 134 after 31.2s
"""


def test_a_collectives_timeout_is_named_not_the_abort_that_followed_it() -> None:
    """The issue's hung-rank case: the rank that waited 30 s on its peer aborts; its message quotes gloo's
    timeout, 10 lines above the "Aborted" and Paddle's FatalError summary."""
    assert errorline.reason(GLOO_TIMEOUT) == (
        "what():  [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read timeout [127.0.0.1]:41234"
    )
    nccl = "step 9\nRuntimeError: NCCL error in: x.cc:47, unhandled system error\nAborted\n"
    assert errorline.reason(nccl) == "RuntimeError: NCCL error in: x.cc:47, unhandled system error"


def test_an_error_line_is_preferred_to_a_signals_word_and_the_launchers_newest_error_to_both() -> None:
    assert errorline.reason("ValueError: nan loss\nstep 9\nAborted\n") == "ValueError: nan loss"
    assert errorline.reason("Aborted\n") == "Aborted"
    launcher = "ValueError: x\n[paddlecloud-launch] error: the rendezvous timed out after 300 s\n"
    assert errorline.reason(launcher) == "the rendezvous timed out after 300 s"


@pytest.mark.parametrize(
    ("message", "collective"),
    [
        (
            "trainer 0 exited with code 1: RuntimeError: [/gloo/transport/tcp/pair.cc:784] connect: Connection refused",
            True,
        ),
        ("trainer 0 exited with code 134: gloo::IoException: Timed out waiting 30000ms for recv", True),
        ("trainer 2 exited with code 1: RuntimeError: NCCL error in: unhandled system error", True),
        ("trainer 0 exited with code 6: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)", True),
        ("trainer 1 exited with code 3: FatalError: `Termination signal` is detected", False),
        # A refused connection of the script's own (a download, a database) is its own failure, not a peer's.
        ("trainer 0 exited with code 1: ConnectionRefusedError: [Errno 111] Connection refused", False),
        ("trainer 1 was killed by signal 9 (SIGKILL)", False),
        # A mention of NCCL or gloo is not a lost peer: a missing library, a backend the script asked for.
        ("trainer 0 exited with code 1: OSError: libnccl.so.2: cannot open shared object file", False),
        ("trainer 0 exited with code 1: ValueError: backend 'gloo' is not available", False),
    ],
)
def test_a_collectives_failure_is_told_from_a_workers_own(message: str, collective: bool) -> None:
    assert errorline.collective_failure(message) is collective
