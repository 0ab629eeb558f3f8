"""What a person changed in memsync's block of a bridged file, as records (issue 22,
item 3). Pure: the block rendered before and the block found now in, records out.

`diff_block` compares the list items of the block found in the file (`locate`'s `inner`)
with those memsync rendered there last (`Rendered`, kept in the state directory):

- a line left as it was, or moved, is no change;
- an edited line (a rendered line replaced by another, in place) supersedes what it showed;
- a deleted line tombstones what it showed;
- an added line is a new entry; one that reads as an item already shown is no change
  (nothing is shown twice).

A block that changed shape is not read line by line: it holds a line that is not a list
item (a heading, a paragraph: an agent rewrote it), or none of several rendered lines is
left. Agents rewrite whole files far more often than people clear a block, so such a
block never becomes tombstones: `Changes.reshaped` says why, and the caller renders the
block again and reports it. A vanished block is the caller's to notice (`locate` gives
None): the same applies.

`change_records` turns the changes into record objects: ids derived from what the entry
says (the same edit made from the same block gives the same id on every machine), a new
id where that one is superseded for good (SEMANTICS rule 10: a superseded id never comes
back), and nothing for a line that looks like a credential (withheld and reported).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from memsync.core import render
from memsync.core.bridge_block import BY_PERSON, LABELS, Item, Rendered
from memsync.core.secrets import find_secrets
from memsync.core.vendor_memory import entry_id

__all__ = ["Changes", "Ingested", "Line", "change_records", "diff_block", "parse_item", "unescape"]

_ITEM = re.compile(r"^\s{0,3}[-*+]\s+(.*?)\s*$")
_LABEL = re.compile(
    r"^(" + "|".join(LABELS.values()) + r")(" + re.escape(BY_PERSON) + r")?:\s*(.*)$",
    re.IGNORECASE,
)
_SCOPE = re.compile(r"^\\?\[([^\]\s\\]+(?:\\.[^\]\s\\]*)*)\\?\]\s+(.*)$")
_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
_KIND_OF = {label.lower(): kind for kind, label in LABELS.items()}

_MAX_SCORED = 400
RESHAPE_MIN = 3
"""A block that had at least this many lines and keeps none of them changed shape."""


@dataclass(frozen=True, slots=True)
class Line:
    """What one list item says: its kind and scope (None where the line does not say)
    and its text, Markdown escapes undone and whitespace folded."""

    kind: str | None
    scope: str | None
    text: str


def parse_item(line: str) -> Line | None:
    """The list item `line`, read as `bridge_block.item_line` writes it, or as a person
    writes one ("- Avoid: ...", "- [github.com] ...", "- plain text"); None when it is
    not a list item or says nothing."""
    m = _ITEM.match(line)
    if m is None:
        return None
    rest = m[1]
    kind = None
    if (lab := _LABEL.match(rest)) is not None:
        kind, rest = _KIND_OF[lab[1].lower()], lab[3]
    scope = None
    if (s := _SCOPE.match(rest)) is not None:
        scope, rest = unescape(s[1]), s[2]
    text = " ".join(render.fold(unescape(rest)).split())
    return Line(kind, scope, text) if text else None


def unescape(text: str) -> str:
    """`text` with Markdown's backslash escapes undone (what `render.md_text` added)."""
    return _UNESCAPE.sub(r"\1", text)


@dataclass(frozen=True, slots=True)
class Changes:
    """A person's changes to a block: (rendered item, new line) edits, deleted items,
    added lines; or `reshaped`, why the block is not read line by line (then no change
    is taken from it)."""

    edits: tuple[tuple[Item, Line], ...] = ()
    deletes: tuple[Item, ...] = ()
    adds: tuple[Line, ...] = ()
    reshaped: str | None = None

    def __bool__(self) -> bool:
        return bool(self.edits or self.deletes or self.adds)


def diff_block(before: Rendered, inner: tuple[str, ...] | list[str]) -> Changes:
    """The changes from the block `before` to the block whose lines between the markers
    are `inner` (the module docstring). Blank lines and whole-line HTML comments (the
    left-out line) are not items."""
    now: list[str] = []
    for n, raw in enumerate(inner, 1):
        line = raw.rstrip()
        if not line.strip() or _COMMENT.match(line):
            continue
        if _ITEM.match(line) is None:
            return Changes(reshaped=f"line {n} of the block is not a list item: {line[:60]!r}")
        now.append(line)
    # A line still present anywhere is no change (a move is not a delete and an add).
    left = Counter(now)
    gone: list[Item] = []
    for item in before.items:
        if left[item.line] > 0:
            left[item.line] -= 1
        else:
            gone.append(item)
    kept = len(before.items) - len(gone)
    if len(before.items) >= RESHAPE_MIN and kept == 0 and (gone or now):
        return Changes(reshaped=f"none of the block's {len(before.items)} lines is left")
    new: list[str] = []
    for line in now:
        if left[line] > 0:
            left[line] -= 1
            new.append(line)
    return _pair(before, gone, new)


def _pair(before: Rendered, gone: list[Item], new: list[str]) -> Changes:
    """Edits where a rendered line gave way to a new one in place, the rest deletes and
    adds."""
    matcher = SequenceMatcher(None, [i.line for i in gone], new, autojunk=False)
    edits: list[tuple[Item, Line]] = []
    deletes: list[Item] = []
    adds: list[Line] = []
    for _tag, a0, a1, b0, b1 in matcher.get_opcodes():
        olds, news = gone[a0:a1], new[b0:b1]
        pairs = _closest(olds, news)
        for a, b in pairs.items():
            line = parse_item(news[b])
            if line is None:
                deletes.append(olds[a])
            elif not _same(olds[a], line, before.home):
                edits.append((olds[a], line))
        deletes.extend(o for a, o in enumerate(olds) if a not in pairs)
        paired_new = set(pairs.values())
        adds.extend(
            x for b, x in enumerate(map(parse_item, news)) if b not in paired_new and x is not None
        )
    shown = [(i, parse_item(i.line)) for i in before.items]
    fresh: list[Line] = []
    for line in adds:
        if not any(_shows(i, said, line, before.home) for i, said in shown) and line not in fresh:
            fresh.append(line)
    return Changes(tuple(edits), tuple(deletes), tuple(fresh))


def _closest(olds: list[Item], news: list[str]) -> dict[int, int]:
    """Which new line replaced which rendered one, where both stand between the same
    unchanged lines: the most alike pairs first (ties in order), each line at most once."""
    if not olds or not news:
        return {}
    if len(olds) * len(news) > _MAX_SCORED:  # a long run rewritten: paired in order
        return {a: a for a in range(min(len(olds), len(news)))}
    scored = sorted(
        (-SequenceMatcher(None, o.line, n, autojunk=False).ratio(), a, b)
        for a, o in enumerate(olds)
        for b, n in enumerate(news)
    )
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    for _score, a, b in scored:
        if a not in pairs and b not in taken:
            pairs[a] = b
            taken.add(b)
    return pairs


def _shows(item: Item, said: Line | None, line: Line, home: str) -> bool:
    """Whether the rendered `item` (reading `said`) already says what the added `line`
    says: an added copy of a shown line is not a second memory."""
    return (
        said is not None
        and said.text == line.text
        and line.kind in (None, item.kind)
        and (line.scope or home) == item.scope
    )


def _same(item: Item, line: Line, home: str) -> bool:
    """Whether `line` says what `item` showed (only its escaping or spacing changed)."""
    shown = parse_item(item.line)
    return (
        shown is not None
        and line.text == shown.text
        and (line.kind or item.kind) == item.kind
        and (line.scope or home) == item.scope
    )


@dataclass(frozen=True, slots=True)
class Ingested:
    """Record objects to append, and the lines withheld (each "why: text")."""

    records: list[dict[str, Any]]
    withheld: list[str]


def change_records(
    changes: Changes,
    *,
    source: str,
    created_at: str,
    default_kind: str = "fact",
    default_scope: str = "global",
    tags: tuple[str, ...] = (),
    superseded: Callable[[str], bool] = lambda _rid: False,
) -> Ingested:
    """The records of `changes`, all created at `created_at` with `source` (naming the
    bridge and the machine: the caller's): a tombstone for each id a deleted line
    showed; for an edited line an entry superseding the first id it showed, and
    tombstones for every id it showed (an inferred record cannot supersede the person's
    entry, rule 10, but a tombstone deletes it, rule 8); for an added line an entry.
    An entry is of the line's kind (else the edited item's, else `default_kind`) and
    scope (else `default_scope`: pass the block's `home`, the scope its lines leave
    unnamed).

    An entry's id is `vendor_memory.entry_id` of "bridge", its kind, scope, text and the
    id it supersedes; where `superseded(id)` says that id is superseded for good (rule
    10), a counter is added until it is not. A line whose text or scope looks like a
    credential makes no record (its edit or deletion neither): it is listed in
    `withheld`.
    """
    out: list[dict[str, Any]] = []
    withheld: list[str] = []

    def entry(line: Line, kind: str, scope: str, supersedes: str | None) -> bool:
        found = find_secrets(f"{line.text}\n{scope}")
        if found:
            withheld.append(f"looks like a secret ({', '.join(found)}): not recorded")
            return False
        parts = ["bridge", kind, scope, line.text, supersedes or ""]
        rid = entry_id(*parts)
        n = 0
        while superseded(rid):
            n += 1
            rid = entry_id(*parts, str(n))
        obj: dict[str, Any] = {
            "id": rid,
            "kind": kind,
            "text": line.text,
            "scope": scope,
            "tags": list(tags),
            "source": source,
            "confidence": 1.0,
            "created_at": created_at,
        }
        if supersedes is not None:
            obj["supersedes"] = supersedes
        out.append(obj)
        return True

    def tombstones(ids: tuple[str, ...]) -> None:
        out.extend({"id": rid, "deleted": True, "created_at": created_at} for rid in ids)

    for item in changes.deletes:
        tombstones(item.ids)
    for item, line in changes.edits:
        if entry(line, line.kind or item.kind, line.scope or default_scope, item.ids[0]):
            tombstones(item.ids)
    for line in changes.adds:
        entry(line, line.kind or default_kind, line.scope or default_scope, None)
    return Ingested(out, withheld)
