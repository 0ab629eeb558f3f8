"""The quick part's columns read a page at a time (`viewranks_read.Pages`): the bytes of
the file, each block checked once, a damaged or shortened file never read as whole."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
import xxhash

from memsync.local.viewranks_read import BLOCK, PAGE, PAGES, Damaged, Pages

BASE = 24  # the columns begin after a header, at no page boundary


def _columns(tmp_path: Path, size: int) -> tuple[Path, bytes, memoryview]:
    body = random.Random(size).randbytes(size)
    path = tmp_path / "m.ranks"
    path.write_bytes(b"h" * BASE + body)
    sums = b"".join(xxhash.xxh3_64_digest(body[i : i + BLOCK]) for i in range(0, size, BLOCK))
    return path, body, memoryview(sums)


def _pages(path: Path, size: int, sums: memoryview) -> Pages:
    return Pages(os.open(path, os.O_RDONLY), BASE, size, sums)


def test_elements_and_runs_are_the_files_bytes(tmp_path: Path) -> None:
    size = 2 * BLOCK + 1000
    path, body, sums = _columns(tmp_path, size)
    pages = _pages(path, size, sums)
    for at in (0, 8, PAGE - 8, PAGE, BLOCK - 8, BLOCK, size - 8):
        assert pages.get(at, "Q") == struct.unpack_from("Q", body, at)[0]
        assert pages.get(at + 4, "I") == struct.unpack_from("I", body, at + 4)[0]
        assert pages.get(at, "q") == struct.unpack_from("q", body, at)[0]
        assert pages.get(at + 7, "B") == body[at + 7]
    assert pages.checked == {0, 1, 2}
    for at, n in ((PAGE - 3, 10), (BLOCK - 5, 2 * PAGE + 7), (size - 9, 9), (5, 0)):
        assert pages.read(at, n) == body[at : at + n]


def test_a_damaged_block_is_never_read(tmp_path: Path) -> None:
    size = 2 * BLOCK
    path, body, sums = _columns(tmp_path, size)
    with open(path, "r+b") as f:  # one byte of the second block changed
        f.seek(BASE + BLOCK + 100)
        f.write(bytes([body[BLOCK + 100] ^ 1]))
    pages = _pages(path, size, sums)
    assert pages.get(0, "Q") == struct.unpack_from("Q", body, 0)[0]  # the first is whole
    with pytest.raises(Damaged):
        pages.get(BLOCK + 2 * PAGE, "Q")
    assert pages.checked == {0}


def test_a_file_cut_short_after_its_check_is_damaged(tmp_path: Path) -> None:
    size = BLOCK
    path, _, sums = _columns(tmp_path, size)
    pages = _pages(path, size, sums)
    pages.get(0, "Q")  # block 0 checked, its first page kept
    os.truncate(path, BASE + PAGE)
    with pytest.raises(Damaged):
        pages.get(3 * PAGE, "Q")


def test_the_pages_kept_are_bounded(tmp_path: Path) -> None:
    size = (PAGES + 10) * PAGE
    path, body, sums = _columns(tmp_path, size)
    pages = _pages(path, size, sums)
    for n in range(PAGES + 10):
        assert pages.get(n * PAGE, "Q") == struct.unpack_from("Q", body, n * PAGE)[0]
        assert len(pages._pages) <= PAGES
