"""Scanning raw lines without parsing them: the byte-level helpers that the merge, the
compaction, the file index and the hub share.

Pure (bytes in, values out). Most lines of a memory file start the usual way
(`{"id": "...`) and carry no `"supersedes"` key, or one set to null: these helpers use that
to skip the lines that cannot matter with a slice, a regular expression or a byte search,
and fall back to a look at every line (or to parsing, `classify`) whenever a line is not
written the usual way, so that what they pick is always a superset of what a parse would.
Line digests (`line_digest`) tell byte-identical lines apart without parsing either.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Container, Iterable

import xxhash

from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.view import Index

__all__ = [
    "USUAL_ID",
    "dest_relevant",
    "line_digest",
    "lines_naming",
    "may_supersede",
    "quick_id",
    "relevant_index",
    "superseding_lines",
    "superseding_starts",
]


line_digest: Callable[[bytes], int] = xxhash.xxh3_128_intdigest
"""A 128-bit digest of a line's bytes: equal digests mean byte-identical lines (the chance
of two different lines colliding is about 2**-128 a pair). A C function, mapped over whole
chunks of lines."""


USUAL_ID = re.compile(rb'\n\{"id": ?"([^"\\\n]*)"')
"""The id of a line that starts the usual way (`{"id": "...`, no escape in the id), found
after its "\\n": one `findall` over "\\n" + a chunk takes every line's."""


def lines_naming(lines: list[bytes], data: bytes, ids: set[str]) -> list[bytes]:
    """The lines among `lines` (the complete lines of `data`) that `relevant_index` may
    keep for `ids` (no `targets`), picked without a Python step per line: one regular
    expression takes the id of every line that starts the usual way; when every line
    does, only those naming one of `ids` are returned, else all of them."""
    found = USUAL_ID.findall(b"\n" + data)
    if len(found) != len(lines):
        return lines
    wanted = {rid.encode() for rid in ids}
    return list(itertools.compress(lines, map(wanted.__contains__, found)))


def dest_relevant(rec: Record, ids: Container[str], targets: Container[str]) -> bool:
    """Whether a destination record bears on judging the incoming candidates: a record of
    one of their ids, or an entry superseding one of the ids they supersede."""
    return rec.id in ids or (rec.supersedes is not None and rec.supersedes in targets)


_ID_PREFIXES = ((b'{"id": "', 8), (b'{"id":"', 7))


def quick_id(raw: bytes) -> str | None:
    """The id of a line that starts the usual way, by slicing; None when unsure (an escape,
    a non-ASCII id, another first key). Not a check that the line is valid."""
    for prefix, start in _ID_PREFIXES:
        if raw.startswith(prefix):
            end = raw.find(b'"', start)
            rid = raw[start:end]
            if end < 0 or b"\\" in rid:
                return None
            try:
                return rid.decode("ascii")
            except UnicodeDecodeError:
                return None
    return None


def relevant_index(
    lines: Iterable[bytes],
    ids: set[str],
    targets: set[str] = frozenset(),  # type: ignore[assignment]
    into: Index | None = None,
    *,
    source: str = "destination",
    first_line: int = 1,
) -> Index:
    """Fold the destination lines that bear on a merge into an index: the records of `ids`
    and the entries superseding one of `targets` (see `dest_relevant`).

    Without parsing, a line that starts the usual way (`{"id": "...`) and names another
    id is skipped, unless `targets` are asked for; any other line is classified (a caller
    asking for `targets` only may pass just the `superseding_lines`). `source` and
    `first_line` (the number of `lines[0]`) name the destination in the
    `UnsupportedFormat` a header of another format raises (rule 2).
    """
    index = Index() if into is None else into
    ids_bytes = {rid.encode() for rid in ids}
    for line_no, raw in enumerate(lines, first_line):
        if not targets:
            for prefix, start in _ID_PREFIXES:
                if raw.startswith(prefix):
                    rid = raw[start : raw.find(b'"', start)]
                    skip = rid not in ids_bytes and b"\\" not in rid
                    break
            else:
                skip = False
            if skip:
                continue
        parsed = classify(raw, source=source, line_no=line_no)
        if type(parsed) is Record and dest_relevant(parsed, ids, targets):
            index.add(parsed)
    return index


_SUPERSEDES_KEY = b'"supersedes"'
_SUPERSEDES_NULL = (b'"supersedes": null', b'"supersedes":null')
_SUPERSEDES_TEXT = (b'"supersedes": "', b'"supersedes":"')


def superseding_lines(data: bytes) -> list[bytes]:
    """The lines of `data` (complete lines, each ending in "\\n") that may supersede an id
    (see `superseding_starts`)."""
    out = []
    for start in superseding_starts(data):
        end = data.find(b"\n", start)
        out.append(data[start : end if end >= 0 else len(data)])
    return out


def superseding_starts(data: bytes) -> list[int]:
    """Where the lines of `data` (complete lines, each ending in "\\n") that may supersede
    an id start: a superset of those `relevant_index` keeps for `targets` (about 1% of a
    real file), found with a few byte searches over `data` rather than a look at every line.

    A line may supersede when it has a `"supersedes"` key not set to null (inside a JSON
    string a quote is escaped, so `"supersedes"` in the bytes is a key), or a `\\u` escape,
    which could spell the key. When the keys are not all written the two usual ways (null,
    or a string after `: ` or `:`), every line is looked at."""
    spots: list[int] = []
    keys = data.count(_SUPERSEDES_KEY)
    nulls = sum(data.count(form) for form in _SUPERSEDES_NULL)
    if keys != nulls:
        for form in _SUPERSEDES_TEXT:
            spots += _find_all(data, form)
        if keys != nulls + len(spots):
            lines = data.split(b"\n")[:-1]
            starts = itertools.accumulate((len(raw) + 1 for raw in lines), initial=0)
            return [at for at, raw in zip(starts, lines, strict=False) if may_supersede(raw)]
    spots += _find_all(data, b"\\u")
    out: list[int] = []
    done = -1
    for pos in sorted(spots):
        if pos < done:
            continue  # a second spot on a line already taken
        out.append(data.rfind(b"\n", 0, pos) + 1)
        end = data.find(b"\n", pos)
        done = end if end >= 0 else len(data)
    return out


def _find_all(data: bytes, needle: bytes) -> list[int]:
    found = []
    at = data.find(needle)
    while at >= 0:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def may_supersede(raw: bytes) -> bool:
    """False only for a line that surely supersedes nothing: no backslash (which could
    spell the key escaped), and no `"supersedes"` key, or just one set to null."""
    if b"\\" in raw:
        return True
    n = raw.count(_SUPERSEDES_KEY)
    if n == 0:
        return False
    return n > 1 or not any(form in raw for form in _SUPERSEDES_NULL)
