"""Where a fold found a record's line, packed in one integer (`Located.at`), and the
lines read again from there: the second pass of a view (`memsync.local.located`) and the
quick part of a persistent view (`memsync.local.viewranks`) read the lines they show
this way, adjacent ones with one `pread`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from memsync.local.storage import errors_named

__all__ = [
    "GAP_BYTES",
    "LENGTH_BITS",
    "LENGTH_MASK",
    "OFFSET_BITS",
    "OFFSET_MASK",
    "RUN_BYTES",
    "lines_at",
    "runs_at",
]

RUN_BYTES = 1024 * 1024
"""The second pass reads at most this much with one `pread` (a run of adjacent lines)."""
GAP_BYTES = 8 * 1024
"""Runs of lines at most this far apart are read with one `pread` (`runs_at`): reading
the lines between costs about what another system call would."""

# `Located.at` packs (file number, offset, length): a record line is at most 64 KiB and
# its "\r" (rule 4), so 17 bits hold its length; 40 bits hold offsets up to 1 TiB.
LENGTH_BITS = 17
OFFSET_BITS = 40
LENGTH_MASK = (1 << LENGTH_BITS) - 1
OFFSET_MASK = (1 << OFFSET_BITS) - 1


def lines_at(ats: Iterable[int], paths: Sequence[Path], fds: Sequence[int]) -> Iterator[bytes]:
    """The line at each packed place of `ats` (`Located.at`: file number in `paths` and
    `fds`, offset, length), in order, as written (without its "\\n"): adjacent lines are
    read with one `pread`. Raises OSError naming the file when a line is no longer where
    it was read: a file rewritten in place, which memsync never does (rule 13)."""
    for run in runs_at(ats, paths, fds):
        lines = run.split(b"\n")
        lines.pop()  # the empty piece after the last "\n" (no copy of the run without it)
        yield from lines


def runs_at(ats: Iterable[int], paths: Sequence[Path], fds: Sequence[int]) -> Iterator[bytes]:
    """The lines of `lines_at`, each run of adjacent ones as the bytes that hold them: the
    lines, each with its "\\n". A writer of many lines copies a run at once (`show
    --json`, issue 20). Runs close together in a file (a few dead lines apart, at most
    `GAP_BYTES`) are read with one `pread` of up to `RUN_BYTES`: a view of a log in time
    order is most of the file in runs of a few lines. Raises OSError as `lines_at` does."""
    group: list[int] = []  # start, end and line count of each run to read at once
    for start, end, count in _runs(ats):
        if group and not (
            0 <= start - group[-2] <= GAP_BYTES
            and end - group[0] <= RUN_BYTES
            and start >> OFFSET_BITS == group[0] >> OFFSET_BITS  # one file
        ):
            yield from _group(paths, fds, group)
            group = []
        group += (start, end, count)
    if group:
        yield from _group(paths, fds, group)


def _runs(ats: Iterable[int]) -> Iterator[tuple[int, int, int]]:
    """The runs of adjacent lines at `ats` (at most `RUN_BYTES` each): the place of the
    first, the place just past the last "\\n" (`(file number << OFFSET_BITS) | offset`
    both) and how many lines."""
    # `at >> LENGTH_BITS` is (file number, offset) as one integer: the next line of the
    # same file is at this line's plus its length and "\n".
    start = expect = -1
    count = 0
    for at in ats:
        where = at >> LENGTH_BITS
        if where == expect and where - start < RUN_BYTES:
            expect = where + (at & LENGTH_MASK) + 1
            count += 1
            continue
        if count:
            yield start, expect, count
        start, expect, count = where, where + (at & LENGTH_MASK) + 1, 1
    if count:
        yield start, expect, count


def _group(paths: Sequence[Path], fds: Sequence[int], group: list[int]) -> list[bytes]:
    """The runs of `group` (start, end and line count of each, the places given as
    `(file number << OFFSET_BITS) | offset`, all in one file, in order), read with one
    `pread`, each with its lines' "\\n"."""
    first, last = group[0], group[-2]
    file_no, offset = first >> OFFSET_BITS, first & OFFSET_MASK
    path = paths[file_no]
    with errors_named(path):
        data = os.pread(fds[file_no], last - first, offset)
    if len(data) != last - first:
        raise OSError(f"{path}: changed while it was read (a file rewritten in place)")
    if len(group) == 3:
        runs = [data]
    else:
        runs = [data[s - first : e - first] for s, e in zip(group[::3], group[1::3], strict=True)]
    for run, count in zip(runs, group[2::3], strict=True):
        if run[-1:] != b"\n" or run.count(b"\n") != count:
            raise OSError(f"{path}: changed while it was read (a file rewritten in place)")
    return runs
