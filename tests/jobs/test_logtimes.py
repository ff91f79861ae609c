"""Line times: the launcher's (offset, time) records beside a log, and the reader that turns them into line times."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

from paddlecloud.contract import logtimes
from paddlecloud.runtime.tee import Tee

from jobs.files.logfiles import line_count, read_chunk


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def write(log: io.BytesIO, times: logtimes.Recorder, data: bytes) -> None:
    times.note(len(data))
    log.write(data)


def test_each_line_gets_the_time_its_first_byte_arrived() -> None:
    log, index, clock = io.BytesIO(), io.BytesIO(), Clock()
    times = logtimes.Recorder(index, 0, clock)
    write(log, times, b"one\ntw")
    clock.now += 1.5
    write(log, times, b"o\nthree\n")
    clock.now += 2
    write(log, times, b"four\n")
    data = log.getvalue()
    t0 = 1_700_000_000.0
    assert logtimes.times_at(index, logtimes.line_starts(data, 0)) == [t0, t0, t0 + 1.5, t0 + 3.5]


def test_records_come_at_most_every_min_gap_so_the_index_grows_with_time_not_lines() -> None:
    index, clock = io.BytesIO(), Clock()
    times = logtimes.Recorder(index, 0, clock, min_gap=0.01)
    for _ in range(10_000):
        times.note(6)  # "line\n" bursts in the same instant
    clock.now += 0.001
    times.note(6)
    assert len(index.getvalue()) == logtimes.RECORD.size
    clock.now += 0.01
    times.note(6)
    assert len(index.getvalue()) == 2 * logtimes.RECORD.size
    assert times.offset == 10_002 * 6


def test_a_reader_starting_mid_log_finds_its_first_record_by_search() -> None:
    log, index, clock = io.BytesIO(), io.BytesIO(), Clock(1000.0)
    times = logtimes.Recorder(index, 0, clock)
    for i in range(20_000):  # more records than one block the reader reads at once
        clock.now = 1000.0 + i
        write(log, times, f"line {i}\n".encode())
    data = log.getvalue()
    start = data.index(b"line 12345\n")
    chunk = data[start : start + 4000]
    got = logtimes.times_at(index, logtimes.line_starts(chunk, start))
    assert got[:3] == [13345.0, 13346.0, 13347.0]
    assert got == [13345.0 + i for i in range(len(got))]


def test_lines_before_the_first_record_have_no_time_and_a_torn_record_is_ignored() -> None:
    index = io.BytesIO(logtimes.RECORD.pack(100, 5.0) + logtimes.RECORD.pack(200, 6.0) + b"\x01\x02")
    assert logtimes.times_at(index, [0, 99, 100, 150, 200, 10_000]) == [None, None, 5.0, 5.0, 6.0, 6.0]
    assert logtimes.times_at(None, [0, 5]) == [None, None]
    assert logtimes.times_at(io.BytesIO(), [3]) == [None]


def test_line_starts_count_the_first_byte_and_each_byte_after_a_newline() -> None:
    assert logtimes.line_starts(b"", 7) == []
    assert logtimes.line_starts(b"a\nb\n", 7) == [7, 9]
    assert logtimes.line_starts(b"a\nb", 7) == [7, 9]
    assert logtimes.line_starts(b"\n\n", 0) == [0, 1]
    for text in ("", "a", "a\n", "a\nb", "\n\n", "x\r50%\ry\n"):
        assert line_count(text) == len(logtimes.line_starts(text.encode(), 0)), text


def test_read_chunk_gives_one_time_per_line_and_holds_back_the_partial_line(tmp_path: Path) -> None:
    log, index, clock = io.BytesIO(), io.BytesIO(), Clock(50.0)
    times = logtimes.Recorder(index, 0, clock)
    for i, piece in enumerate([b"a\n", b"b\n", b"10%\r", b"20%\r", b"done\n", b"partial"]):
        clock.now = 50.0 + i
        write(log, times, piece)
    chunk = read_chunk(log, 0, final=False, times=index)
    assert chunk.text == "a\nb\n10%\r20%\rdone\n"
    assert chunk.times == [50.0, 51.0, 52.0]  # a progress line keeps the time it began
    rest = read_chunk(log, int(chunk.cursor), final=True, times=index)
    assert (rest.text, rest.times) == ("partial", [55.0])


def test_the_launchers_tee_stamps_what_it_writes_and_leaves_the_log_plain(tmp_path: Path) -> None:
    with (tmp_path / "log.txt").open("ab", buffering=0) as log:
        log.write(b"=== an earlier attempt ===\n")
        times = logtimes.open_recorder(log, tmp_path)
        tee = Tee(log, times)
        tee.line("hello")
        tee.write(b"loss 1.0\n")
        times.stop()
    data = (tmp_path / "log.txt").read_bytes()
    assert data == b"=== an earlier attempt ===\n[paddlecloud-launch] hello\nloss 1.0\n"
    records = list(logtimes.RECORD.iter_unpack((tmp_path / logtimes.TIMES_NAME).read_bytes()))
    assert records[0][0] == len(b"=== an earlier attempt ===\n")  # offsets continue the existing log
    with (tmp_path / logtimes.TIMES_NAME).open("rb") as index:
        got = logtimes.times_at(index, logtimes.line_starts(data, 0))
    assert got[0] is None and got[1] is not None and got[2] is not None


def test_a_failed_index_write_never_stops_the_log() -> None:
    class Full(io.BytesIO):
        def write(self, data: object) -> int:
            raise OSError(28, "No space left on device")

    times = logtimes.Recorder(Full(), 0, Clock())
    for size in itertools.repeat(10, 3):
        times.note(size)
    assert times.offset == 30


def test_a_forged_index_reads_no_more_than_the_span_and_gives_only_plausible_times() -> None:
    # The job writes log.times, so it may hold anything: offsets out of order, NaN, a year 10^9.
    records = [(0, 100.0), (10**12, float("nan")), (5, float("inf")), (6, 1e30), (7, 1.7e9)] + [(1, 1.0)] * 100_000
    index = CountingIO(b"".join(logtimes.RECORD.pack(offset, when) for offset, when in records))
    times = logtimes.times_at(index, [0, 5, 6, 7])
    assert times[0] == 100.0 and all(t is None or 0 <= t < logtimes.LATEST for t in times)
    assert index.largest_read <= 9 * logtimes.RECORD.size  # at most the span's records, not 100,000


class CountingIO(io.BytesIO):
    largest_read = 0

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self.largest_read = max(self.largest_read, len(data))
        return data
