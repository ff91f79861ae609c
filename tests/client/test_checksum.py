"""contract.checksum: how both sides write and read an upload's checksum."""

from __future__ import annotations

import xxhash
from paddlecloud.contract import checksum


def test_written_checksums_read_back_as_their_digest() -> None:
    digest = xxhash.xxh3_128_hexdigest(b"data")
    assert checksum.written(digest) == f"xxh3_128:{digest}"
    assert checksum.hex_of(checksum.written(digest)) == digest
    assert checksum.hex_of(digest.upper()) == digest  # the prefix may be left out; case does not matter


def test_what_is_not_a_checksum_reads_as_none() -> None:
    for value in ("", "xxh3_128:", "md5:" + "0" * 32, "xxh3_128:" + "0" * 31, "0" * 33, "xxh3_128:" + "g" * 32):
        assert checksum.hex_of(value) is None, value
