"""Reading the columns of a quick part (`memsync.local.viewranks`) a page at a time.

A prompt reads a few thousand elements scattered over the columns (a binary search of the
ids per id appended since, then eight columns per entry it shows), and each 64 KiB block
it touches must be checked against its checksum once. Through a mapping of the file, each
element read mapped far more than its page into the process: the kernel maps the pages
around it (64 KiB of fault-around; the whole folio, up to 2 MiB, where the page cache holds
the file in large folios, as a file just written here does), and a block's check read all
of it through the mapping. A long-lived server's first prompt at 1M records then mapped
about 55 MB (peak RSS 133 MB, its target 100 MB; `madvise(MADV_RANDOM)` changes nothing
of that). Read with `os.pread`, what a call holds is the 4 KiB pages it reads, kept (at
most `PAGES` of them) for the next calls, and a block checked is read once and dropped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from array import array
from typing import Any

import xxhash

__all__ = ["BLOCK", "PAGE", "PAGES", "Damaged", "Pages"]

BLOCK = 1 << 16
"""The columns' checked unit: each block of this many bytes has its own checksum."""
PAGE = 1 << 12
"""The unit read: no element (at most 8 bytes, aligned to its size) crosses a page."""
PAGES = 256
"""The pages kept between calls (1 MiB): mostly the top of the binary search of the ids
(what a server asks again and again, the rows of ids and the top of the drop order, `Quick`
keeps decoded)."""

# The columns' element types (`array`'s codes: native sizes, in this machine's byte order,
# which the quick part's format names). (No `struct`, no `weakref`: a prompt imports neither.)
_SIZES = {code: array(code).itemsize for code in "BIQq"}
_SIGNED = {"B": False, "I": False, "Q": False, "q": True}


class Damaged(Exception):
    """A block of the columns is not what was written (or cannot be read)."""


class Pages:
    """The `size` bytes of columns at `base` in the quick part open as `fd` (which this
    owns: closed when it is dropped), whose blocks have the checksums `sums` (8 bytes
    each, xxh3-64). Every byte returned is of a block found whole (else Damaged)."""

    def __init__(self, fd: int, base: int, size: int, sums: memoryview) -> None:
        self.fd, self.base, self.size, self.sums = fd, base, size, sums
        self.blocks = len(sums) // 8
        self.checked: set[int] = set()
        self._pages: dict[int, bytes] = {}

    def __del__(self) -> None:
        with contextlib.suppress(OSError):  # (closed: nothing to do)
            os.close(self.fd)

    def get(self, at: int, code: str) -> Any:
        """The element of type `code` (`array`'s) at byte `at` of the columns."""
        off = at % PAGE
        raw = self._page(at)[off : off + _SIZES[code]]
        return int.from_bytes(raw, sys.byteorder, signed=_SIGNED[code])

    def read(self, at: int, n: int) -> bytes:
        """The `n` bytes at byte `at` of the columns."""
        parts = []
        while n > 0:
            page = self._page(at)
            take = min(n, PAGE - at % PAGE)
            parts.append(page[at % PAGE : at % PAGE + take])
            at, n = at + take, n - take
        return b"".join(parts)

    def check(self, block: int) -> bytes:
        """Block `block`, read and checked against its checksum (raises Damaged)."""
        start = block * BLOCK
        want = min(BLOCK, self.size - start)
        data = self._pread(want, start)
        if xxhash.xxh3_64_digest(data) != self.sums[block * 8 : block * 8 + 8]:
            raise Damaged
        self.checked.add(block)
        return data

    def _page(self, at: int) -> bytes:
        n = at // PAGE
        page = self._pages.get(n)
        if page is None:
            block, start = at // BLOCK, n * PAGE
            if block in self.checked:
                page = self._pread(min(PAGE, self.size - start), start)
            else:  # its first read: the whole block, checked, of which this page is kept
                at_page = start - block * BLOCK
                page = bytes(memoryview(self.check(block))[at_page : at_page + PAGE])
            if len(self._pages) >= PAGES:
                self._pages.clear()
            self._pages[n] = page
        return page

    def _pread(self, want: int, start: int) -> bytes:
        """`want` bytes at `start`: a read error or a file cut short since it was checked
        is a damaged quick part (the caller folds), not an error of the command."""
        try:
            data = os.pread(self.fd, want, self.base + start)
        except OSError:
            raise Damaged from None
        if want <= 0 or len(data) != want:
            raise Damaged
        return data
