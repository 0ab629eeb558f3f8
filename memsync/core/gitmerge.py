"""git's three-way merge of a memory file, by memsync's rules (issue 22, item 6).

Pure: the bytes of the three versions git hands its merge driver (BASE, OURS, THEIRS) in,
the merged file's bytes out. The result is OURS byte for byte, then what THEIRS holds that
OURS lacks and has not already beaten, in the order a merge appends it (SEMANTICS rule 14:
`memsync.core.merge.plan_merge`). Its view is the view of the union of both sides, at every
`now` (rules 8 to 12), so two branches that each appended, forgot and superseded merge with
no conflict.

What BASE adds: a line BASE held that OURS no longer holds was removed on our side since
the branches parted, by compaction (rule 15). THEIRS still holds it, untouched; merging it
back would resurrect, byte for byte, what compaction took out. Such lines are left out,
unless leaving them out changes the view (a live entry is never lost: someone who deleted
a line by hand, rather than forgetting it with a tombstone, gets it back).

A committed file is complete: unlike a file being appended to (rule 1), a last line
without its "\\n" is a line, not a write in progress. What cannot be merged without losing
something of THEIRS is refused with one line (`MemsyncError`), and git then reports a
conflict: a bad line (rule 4) or a line that looks like a credential in THEIRS that OURS
does not hold, a header of another format (rule 2), or a side that is no memory file at
all (lines, but no header and no valid record: JSON Lines of something else).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from memsync.core.lines import Header, Invalid, SourceLines, classify
from memsync.core.merge import MergePlan, plan_merge
from memsync.core.records import Record, canonical
from memsync.core.view import Index
from memsync.errors import MemsyncError

__all__ = ["GitMerge", "gitattributes_with", "merge_three", "view_summary"]

_BOM = b"\xef\xbb\xbf"
_NEVER_HELD = 1 << 62
"""`max_future` for a git merge: a committed line is merged whatever its date (the hold of
future-dated records is for records arriving from a peer's clock, not for history)."""


@dataclass(frozen=True, slots=True)
class GitMerge:
    """A merged file and what the merge did.

    Attributes:
        data: the merged file's bytes (OURS first, then the lines appended).
        appended: how many lines were appended after OURS (rule 14's repeats included).
        repeated: how many of them repeat, byte for byte, a line the file already holds
            (rule 14: the line an id's view ends on, after a beaten record that travels).
        left_out: lines of THEIRS that OURS compacted away since BASE and that stay out.
        twins: (OURS' record, THEIRS' record) pairs with one key, different content (rule 7).
    """

    data: bytes
    appended: int
    repeated: int
    left_out: int
    twins: list[tuple[Record, Record]] = field(default_factory=list)


def _lines(data: bytes) -> list[bytes]:
    """The lines of a committed file: a leading byte order mark aside (rule 1), and the
    last line complete even without its "\\n"."""
    data = data.removeprefix(_BOM)
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def view_summary(records: Iterable[Record]) -> dict[str, bytes]:
    """Each id's live current version, as canonical JSON, before expiry (rules 8 to 10):
    two sets of records with equal summaries have equal views at every `now` (rule 11
    reads only the current version's own `expires_at`)."""
    index = Index()
    for rec in records:
        index.add(rec)
    out: dict[str, bytes] = {}
    for rid in index.ids():
        cur = index.current(rid)
        if cur is not None and not index.is_superseded(rid, cur):
            out[rid] = canonical(cur)
    return out


def _records(lines: Iterable[bytes], source: str) -> list[Record]:
    out = []
    for n, raw in enumerate(lines, 1):
        parsed = classify(raw, source=source, line_no=n)
        if type(parsed) is Record:
            out.append(parsed)
    return out


def _check_theirs(lines: list[bytes], held: set[bytes], label: str) -> None:
    """Refuse a bad line of THEIRS that OURS neither holds nor compacted away (rule 4: it
    would be dropped, and git must not lose it silently). Raises UnsupportedFormat for a
    header of another format (rule 2)."""
    for n, raw in enumerate(lines, 1):
        parsed = classify(raw, source=label, line_no=n)
        if type(parsed) is Invalid and raw not in held:
            raise MemsyncError(
                f"{label}:{n}: bad line ({parsed.reason}); not merged, fix it and merge again"
            )


def _require_memory(lines: list[bytes], label: str) -> None:
    """Refuse a side that holds lines but neither a header nor a valid record: not a
    memory file (a JSON Lines file of something else matched by `*.jsonl`), whose lines
    a memory merge would not keep (git's own merge must decide, as a conflict)."""
    for n, raw in enumerate(lines, 1):
        if type(classify(raw, source=label, line_no=n)) in (Record, Header):
            return
    if any(raw.strip() for raw in lines):
        raise MemsyncError(f"{label}: not a memory file (no header and no valid record)")


def _chunks(lines: list[bytes], skip: set[bytes], label: str) -> list[SourceLines]:
    """`lines` without those in `skip`, as chunks of consecutive lines that keep their line
    numbers (for the messages)."""
    chunks = []
    for keep, group in itertools.groupby(enumerate(lines, 1), key=lambda p: p[1] not in skip):
        if keep:
            run = list(group)
            chunks.append((label, run[0][0], [raw for _, raw in run]))
    return chunks


def _plan(ours: list[bytes], theirs: list[bytes], skip: set[bytes], label: str) -> MergePlan:
    plan = plan_merge(ours, _chunks(theirs, skip, label), 0, _NEVER_HELD)
    if plan.withheld:
        w = plan.withheld[0]
        raise MemsyncError(
            f"{w.source}:{w.line}: looks like it holds a credential ({', '.join(w.kinds)}); "
            "not merged: remove it and merge again"
        )
    return plan


def merge_three(base: bytes, ours: bytes, theirs: bytes, *, name: str = "memory") -> GitMerge:
    """Merge THEIRS into OURS, given their common ancestor BASE (empty when there is none).

    `name` (the path git merges) names the sides in messages: "NAME (theirs):LINE: ...".

    Raises:
        MemsyncError: THEIRS holds a bad line or a credential OURS does not hold, or a side
            names another format (nothing is merged; git reports a conflict).
    """
    label, ours_label = f"{name} (theirs)", f"{name} (ours)"
    base_lines, ours_lines, theirs_lines = _lines(base), _lines(ours), _lines(theirs)
    _require_memory(ours_lines, ours_label)
    _require_memory(theirs_lines, label)
    ours_set = set(ours_lines)
    dropped = set(base_lines) - ours_set
    _check_theirs(theirs_lines, ours_set | dropped, label)
    compacted = {raw for raw in theirs_lines if raw in dropped}
    plan = _plan(ours_lines, theirs_lines, compacted, label)
    if compacted:
        expected = view_summary(
            itertools.chain(_records(ours_lines, ours_label), _records(theirs_lines, label))
        )
        got = view_summary(itertools.chain(_records(ours_lines, ours_label), plan.append))
        if got != expected:
            # Put back what bears on the ids whose view changed, then, if need be, all.
            changed = {
                rid for rid in expected.keys() | got.keys() if expected.get(rid) != got.get(rid)
            }
            bearing = {
                r.raw
                for r in _records(compacted, label)
                if r.id in changed or r.supersedes in changed
            }
            compacted -= bearing
            plan = _plan(ours_lines, theirs_lines, compacted, label)
            got = view_summary(itertools.chain(_records(ours_lines, ours_label), plan.append))
            if got != expected:
                compacted = set()
                plan = _plan(ours_lines, theirs_lines, compacted, label)
    data = ours
    added = plan.data()
    if added:
        if not _lines(ours) and theirs_lines:
            head = theirs_lines[0]
            if type(classify(head, source=label, line_no=1)) is Header:
                data = head + b"\n"  # a file new on both sides keeps THEIRS' header (rule 2)
        elif data and not data.endswith(b"\n"):
            data += b"\n"
        data += added
    left_out = sum(1 for raw in theirs_lines if raw in compacted)
    return GitMerge(data, len(plan.append), len(plan.repeated), left_out, list(plan.twins))


def gitattributes_with(text: str, patterns: Iterable[str], driver: str = "memsync") -> str:
    """`text` (a `.gitattributes` file) with a `PATTERN merge=DRIVER` line for each of
    `patterns` that has none yet; existing lines are kept as they are, new ones appended.

    Raises:
        MemsyncError: a pattern holds whitespace or starts with "#" or "!" (a
            `.gitattributes` line could not say it as written).
    """
    want = f"merge={driver}"
    have: set[str] = set()
    for line in text.splitlines():
        fields = line.split()
        if fields and want in fields[1:]:
            have.add(fields[0])
    out = text
    for pattern in patterns:
        if not pattern or any(c.isspace() for c in pattern) or pattern[0] in '#!"':
            raise MemsyncError(
                f"{pattern!r}: a .gitattributes pattern cannot hold whitespace or start "
                'with "#", "!" or a quote (use "?" for a space)'
            )
        if pattern in have:
            continue
        if out and not out.endswith("\n"):
            out += "\n"
        out += f"{pattern} {want}\n"
        have.add(pattern)
    return out
