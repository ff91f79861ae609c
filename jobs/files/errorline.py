"""The one rule for "why did this worker fail": the most telling error line of its log's tail, bounded and escaped.

Both engines read the end of a worker's `log.txt` (the launcher writes it on the PFS locally and in
pods) and put what this finds into the worker's and the job's message, so a failed job names its
error without anyone opening the log. Pure functions on text: no files, no Django.
"""

from __future__ import annotations

import re

MAX_REASON = 300  # characters of a log line quoted in a message
TAIL_BYTES = 64 * 1024  # how much of a log's end is read to find it

_LAUNCHER = "[paddlecloud-launch] "
_LAUNCHER_ERROR = _LAUNCHER + "error: "
_ATTEMPT = "=== attempt started "
# Lines that say what went wrong, newest wins: a Python exception (the last line of a traceback, also
# Paddle's `InvalidArgumentError: ...` summary), Python refusing to start a script, a shell that cannot
# find a command, argparse's usage error, a fatal signal's words.
_ERROR_LINE = re.compile(
    r"^(?:"
    r"(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Fault)(?::\s.*)?"
    r"|\S*python[\d.]*: can't open file .*"
    r"|\S*sh: .*(?:not found|No such file or directory|Permission denied|Syntax error).*"
    r"|\S+: error: .+"
    r"|(?:Segmentation fault|Bus error|Aborted|Killed|Floating point exception)\b.*"
    r")$"
)
# The most telling lines, preferred to any newer error line: a collective's own words (gloo's or NCCL's exception or
# timeout, a C++ exception's `what():`), which a rank that waited on a hung peer writes before its SIGABRT, whose
# "Aborted" (or a Python error raised from the failed collective) is newer and says less.
_TELLING = re.compile(
    r"gloo::\w*(?:Exception|EnforceNotMet)|TimeoutException|NCCL (?:error|WARN)|"
    r"Watchdog caught collective operation timeout|^\s*what\(\):\s+\S"
)
# A collective's lost peer: gloo's or NCCL's words for a connection refused, reset or closed, a read that failed, a
# time-out, a remote process gone; or a collective's own time-out. A rank writes them when a peer is gone or hung:
# they tell of another rank's failure. A mere mention of gloo or NCCL (a missing libnccl, a path) is not one.
_COLLECTIVE = re.compile(
    r"(?:gloo|nccl).*(?:connection (?:refused|reset|closed)|read error|socket closed|timed? ?out|remote process|"
    r"unhandled system error)|collective operation timeout|ncclRemoteError",
    re.IGNORECASE,
)
_SIGNAL_WORDS = re.compile(r"^(?:Segmentation fault|Bus error|Aborted|Killed|Floating point exception)\b")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean(text: str, limit: int = MAX_REASON) -> str:
    """`text` as one printable line of at most `limit` characters: control characters shown as `\\xNN`."""
    one = _CONTROL.sub(lambda m: " " if m.group() == "\t" else f"\\x{ord(m.group()):02x}", text.strip())
    return one if len(one) <= limit else one[: limit - 3].rstrip() + "..."


def _last_attempt(tail: str) -> list[str]:
    """The lines of the newest attempt (the launcher starts each with `=== attempt started ...`)."""
    lines = tail.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(_ATTEMPT)]
    return lines[starts[-1] + 1 :] if starts else lines


def last_error_line(tail: str) -> str:
    """The most telling error line of a log's tail, cleaned; "" if there is none. The launcher's own `error:` line
    if it is the newest; else the newest collective or C++ exception line (_TELLING); else the newest error line
    (_ERROR_LINE) that is more than a fatal signal's word; else the newest of those."""
    chosen: dict[int, str] = {}  # rank -> the newest line of it: 0 telling, 1 an error, 2 a signal's word
    for line in reversed(_last_attempt(tail)):
        text = line.strip()
        if line.startswith(_LAUNCHER_ERROR):
            if not chosen:
                return clean(line[len(_LAUNCHER_ERROR) :])
            continue
        if line.startswith(_LAUNCHER) or not text:
            continue
        if _TELLING.search(text):
            chosen.setdefault(0, text)
            break  # nothing older beats it
        if _ERROR_LINE.match(text):
            chosen.setdefault(2 if _SIGNAL_WORDS.match(text) else 1, text)
    return clean(chosen[min(chosen)]) if chosen else ""


def collective_failure(message: str) -> bool:
    """True when a failed worker's message quotes a collective's lost peer (_COLLECTIVE): it died of a peer's."""
    return bool(_COLLECTIVE.search(message))


def last_line(tail: str) -> str:
    """The newest line the worker's own program wrote (not the launcher's nor the portal's), cleaned; or ""."""
    for line in reversed(_last_attempt(tail)):
        if line.strip() and not line.startswith((_LAUNCHER, "[paddlecloud] ")):
            return clean(line)
    return ""


def reason(tail: str) -> str:
    """Its last error line, else its last line of output."""
    return last_error_line(tail) or last_line(tail)


def worker_reason(tail: str, role: str) -> str:
    """What a failed worker's message quotes from its log's tail: a trainer's last error line (a plain
    last line, say a loss, would mislead); a pserver's last error line, else its last line (pservers
    never end by themselves: whatever it said last is the news)."""
    return reason(tail) if role == "pserver" else last_error_line(tail)
