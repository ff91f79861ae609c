"""Log cursors: whole lines only while a log grows, nothing missed or repeated, tail reads the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import Invalid
from jobs.files.logfiles import LogChunk, parse_cursor, read_chunk


def read_after(path: Path, cursor: str, final: bool, limit: int = 256 * 1024) -> LogChunk:
    offset = parse_cursor(cursor)
    if not path.exists():
        return LogChunk(text="", cursor=str(offset), complete=final)
    with path.open("rb") as handle:
        return read_chunk(handle, offset, final, limit)


def test_a_follower_gets_every_line_exactly_once_while_the_log_grows(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("one\ntw")
    first = read_after(log, "", final=False)
    assert (first.text, first.complete) == ("one\n", False)
    with log.open("a") as handle:
        handle.write("o\nthree\n")
    second = read_after(log, first.cursor, final=False)
    assert second.text == "two\nthree\n"
    third = read_after(log, second.cursor, final=True)
    assert (third.text, third.cursor, third.complete) == ("", second.cursor, True)


def test_a_final_log_passes_its_last_unfinished_line(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("a\nno newline")
    chunk = read_after(log, "", final=True)
    assert chunk.text == "a\nno newline" and chunk.complete


def test_big_logs_come_in_chunks_that_join_up(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    lines = [f"line {i}\n" for i in range(5000)]
    log.write_text("".join(lines))
    cursor, text = "", ""
    for _ in range(100):
        chunk = read_after(log, cursor, final=False, limit=4096)
        if chunk.cursor == cursor:
            break
        text, cursor = text + chunk.text, chunk.cursor
    assert text == "".join(lines)


def test_a_missing_log_is_empty_not_an_error(tmp_path: Path) -> None:
    chunk = read_after(tmp_path / "nope.txt", "", final=False)
    assert (chunk.text, chunk.cursor) == ("", "0")


@pytest.mark.parametrize("cursor", ["abc", "-5", "1.5", "9" * 5000, "١٢", " 1e3"])
def test_a_bad_cursor_names_the_field(tmp_path: Path, cursor: str) -> None:
    with pytest.raises(Invalid) as error:
        read_after(tmp_path / "log.txt", cursor, final=False)
    assert error.value.field == "cursor"


def test_a_huge_cursor_is_quoted_short(tmp_path: Path) -> None:
    with pytest.raises(Invalid) as error:
        read_after(tmp_path / "log.txt", "7" * 100_000, final=False)
    assert len(str(error.value)) < 300
