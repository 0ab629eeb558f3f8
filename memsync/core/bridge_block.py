"""The block memsync writes into a file an agent reads (issue 22, items 2 and 4). Pure:
records in, text out; text in, the block's place out.

A bridged file (`AGENTS.md`, `CLAUDE.md`, `GEMINI.md`, any Markdown rules file) holds one
managed block between two marker lines, `BEGIN` and `END`. Everything outside the block
belongs to the person and the agents; memsync only ever replaces the block.

- `render_block` renders the view's selection (scope, kinds, minimum confidence, a budget
  in characters, bytes or lines, and the reader's own limit, `FORMAT_LIMITS`) into the
  block: the same entries give the same bytes on every machine. Each entry is one list
  item: its kind (and, marked by memsync, whether the person said it), its scope when not
  global, and its text, every record string rendered by `memsync.core.render.md_text`
  (SEMANTICS rule 17), with `@` escaped too (Claude Code and Gemini CLI read `@word` as a
  file import). No line can hold `## Gemini Added Memories` (every `#` is escaped), so
  Gemini CLI's legacy `save_memory` never adopts the block. Entries whose text looks like
  a credential are withheld, never written. What the budget left out is said in a comment
  line inside the block.
- `locate` finds the block: exactly one begin and one end marker, each on a line of its
  own, in that order; anything else is refused with the reason (`BlockError`), never
  paired by first match (the bug that deleted people's text in other tools).
- `Rendered.to_json` / `Rendered.from_json`: what was rendered, kept in the state
  directory, so that `memsync.core.bridge_edits` can tell a person's edits from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memsync.core import render
from memsync.core.prompt import PROMPT_KIND_ORDER, PromptEntry, drop_rank, scope_matches
from memsync.core.secrets import find_secrets
from memsync.errors import MemsyncError

__all__ = [
    "BEGIN",
    "END",
    "FORMAT_LIMITS",
    "BlockError",
    "Item",
    "Limits",
    "Rendered",
    "Selection",
    "Span",
    "item_line",
    "locate",
    "render_block",
]

BEGIN = (
    "<!-- memsync begin: generated from your memory. Edit, add or delete list items"
    " here and memsync records it; `memsync bridge remove` takes this block out. -->"
)
"""The begin marker line. It must not hold the word "end": `memsync.core.vendor_memory`
reads the last begin/end word of a memsync comment."""
END = "<!-- memsync end -->"
"""The end marker line."""

LABELS = {
    "preference": "Preference",
    "avoid": "Avoid",
    "lesson": "Lesson",
    "fact": "Fact",
    "source": "Source",
}
"""Each kind's label at the start of its list items."""
BY_PERSON = " (said by the person)"
"""memsync's mark, after the label, on an entry the person said (`source: "user"`)."""


class BlockError(MemsyncError):
    """The markers of a file do not delimit exactly one block: the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A reader's limit on the block, markers included: UTF-8 bytes, characters, lines
    (None: no limit of that measure)."""

    max_bytes: int | None = None
    max_chars: int | None = None
    max_lines: int | None = None

    def within(self, other: Limits) -> Limits:
        """The tighter of the two limits on each measure."""
        return Limits(
            _least(self.max_bytes, other.max_bytes),
            _least(self.max_chars, other.max_chars),
            _least(self.max_lines, other.max_lines),
        )


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


FORMAT_LIMITS = {
    # Codex: project docs stop at project_doc_max_bytes, 32 KiB by default, comments
    # included (its loader truncates mid-byte).
    "agents-md": Limits(max_bytes=32 * 1024),
    # Claude Code loads a CLAUDE.md of up to 4 MiB; past that it skips the whole file.
    "claude-md": Limits(max_bytes=4 * 1024 * 1024),
    "gemini-md": Limits(),
    "markdown": Limits(),
    # The MEMORY.md index: the first 200 lines or 25 KB are loaded.
    "claude-auto-memory": Limits(max_bytes=25_000, max_lines=200),
}
"""Each format's own limit on the block (the file's other bytes are the caller's to count:
`render_block`'s `limits`)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """What of the view goes into the block: entries of `scope`'s task
    (`core.prompt.scope_matches`; None: global entries only), of `kinds`, with a
    confidence of at least `min_confidence`, within `budget`; and the scope its lines
    leave unnamed (`home`)."""

    scope: str | None = None
    kinds: tuple[str, ...] = PROMPT_KIND_ORDER
    min_confidence: float = 0.0
    budget: Limits = field(default_factory=Limits)
    home: str = "global"
    """The block's own scope: its lines name any other scope, not this one, and a line a
    person writes without one is of this scope."""

    def takes(self, e: PromptEntry) -> bool:
        """Whether `e` is of this selection (the budget aside)."""
        return (
            e.kind in self.kinds
            and e.confidence >= self.min_confidence
            and scope_matches(e.scope, self.scope)
        )

    def taken(self, entries: Iterable[PromptEntry]) -> tuple[list[PromptEntry], list[str]]:
        """The entries this selection takes (`takes`), in their order, but those that look
        like credentials (`core.secrets.find_secrets` on text and scope): their ids come
        second, withheld, never rendered."""
        chosen: list[PromptEntry] = []
        withheld: list[str] = []
        for e in entries:
            if not self.takes(e):
                continue
            if find_secrets(f"{e.text}\n{e.scope}"):
                withheld.append(e.id)
            else:
                chosen.append(e)
        return chosen, withheld


@dataclass(frozen=True, slots=True)
class Item:
    """One list item of a rendered block: its line (without "\\n"), the ids of the entries
    it shows (several when entries read the same), and the kind and scope they share."""

    line: str
    ids: tuple[str, ...]
    kind: str
    scope: str


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered block: `text` (markers included, "\\n" line ends, ending in "\\n"), its
    list items in order, how many selected entries the budget left out, the ids of
    entries withheld because they look like credentials, and its `home` scope (the one
    its lines do not name: `Selection.home`)."""

    text: str
    items: tuple[Item, ...]
    left_out: int = 0
    withheld: tuple[str, ...] = ()
    home: str = "global"

    def to_json(self) -> bytes:
        """What `from_json` reads back (kept in the state directory)."""
        doc = {
            "version": 1,
            "text": self.text,
            "items": [[i.line, list(i.ids), i.kind, i.scope] for i in self.items],
            "left_out": self.left_out,
            "withheld": list(self.withheld),
            "home": self.home,
        }
        return json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Rendered:
        """A block rendered before, from `to_json`'s bytes.

        Raises:
            ValueError: the bytes are not what `to_json` writes.
        """
        try:
            doc = json.loads(data)
            if doc.get("version") != 1:
                raise ValueError(f"unknown version {doc.get('version')!r}")
            items = tuple(
                Item(str(line), tuple(map(str, ids)), str(kind), str(scope))
                for line, ids, kind, scope in doc["items"]
            )
            return cls(
                str(doc["text"]),
                items,
                int(doc["left_out"]),
                tuple(doc["withheld"]),
                str(doc["home"]),
            )
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a rendered block ({exc})") from None


_AT = re.compile("@")


def item_line(e: PromptEntry, home: str = "global") -> str:
    """The list item of entry `e`: "- Label[ (said by the person)]: [\\[scope\\] ]text"
    (the scope named unless it is the block's `home`),
    its strings escaped as Markdown (rule 17) and every `@` escaped (not an import)."""
    label = LABELS[e.kind] + (BY_PERSON if e.user else "")
    where = "" if e.scope == home else f"\\[{_md(e.scope)}\\] "
    return f"- {label}: {where}{_md(e.text)}".rstrip()


def _md(text: str) -> str:
    return _AT.sub(r"\\@", render.md_text(text))


def _order(e: PromptEntry) -> tuple[int, bool, float, int, str]:
    return (PROMPT_KIND_ORDER.index(e.kind), not e.user, -e.confidence, e.ts, e.id)


def _note(left_out: int) -> str:
    noun = "entry" if left_out == 1 else "entries"
    return (
        f"<!-- memsync: {left_out} more {noun} of this selection left out to fit the"
        " budget (lowest confidence first) -->"
    )


def _measure(lines: Sequence[str]) -> tuple[int, int, int]:
    """Bytes, characters and lines of the block made of `lines`."""
    chars = sum(len(x) + 1 for x in lines)
    return sum(len(x.encode("utf-8")) + 1 for x in lines), chars, len(lines)


def _fits(size: tuple[int, int, int], limits: Limits) -> bool:
    caps = (limits.max_bytes, limits.max_chars, limits.max_lines)
    return all(cap is None or n <= cap for n, cap in zip(size, caps, strict=True))


def render_block(
    entries: Iterable[PromptEntry], selection: Selection, limits: Limits = Limits()
) -> Rendered:
    """The block of the entries `selection` takes, within `selection.budget` and
    `limits` (the format's, `FORMAT_LIMITS`, tightened by the caller for what the file
    already holds), markers and the left-out line included.

    Items are ordered by kind (`PROMPT_KIND_ORDER`), the person's first, then by
    confidence (highest first), age and id; entries whose lines read the same are one item.
    When the budget cannot hold every item, entries are dropped in `drop_rank` order
    (lowest confidence, inferred before the person's, oldest first), an item too long
    for what is left is passed over, and a comment line says how many were left out.
    Entries that look like credentials (`core.secrets.find_secrets` on text and scope)
    are withheld: never rendered, listed in `withheld`.

    Raises:
        BlockError: the limits cannot hold even the two markers and the left-out line.
    """
    limits = selection.budget.within(limits)
    chosen, withheld = selection.taken(entries)
    home = selection.home
    lines = {id(e): item_line(e, home) for e in chosen}
    kept = _pack(chosen, lines, limits)
    if kept is None:
        raise BlockError(f"the bridge's limit {_show(limits)} cannot hold even its markers")
    groups: dict[str, list[PromptEntry]] = {}
    for e in sorted(kept, key=_order):
        groups.setdefault(lines[id(e)], []).append(e)
    items = tuple(
        Item(line, tuple(e.id for e in group), group[0].kind, group[0].scope)
        for line, group in groups.items()
    )
    left_out = len(chosen) - len(kept)
    body = [BEGIN, *(i.line for i in items), *([_note(left_out)] if left_out else []), END]
    return Rendered("\n".join(body) + "\n", items, left_out, tuple(sorted(withheld)), home)


def _pack(
    chosen: list[PromptEntry], lines: dict[int, str], limits: Limits
) -> list[PromptEntry] | None:
    """The entries kept within `limits`: all of them when they fit, else the best in
    drop order (an item too long for what is left passed over), with room for the
    left-out line kept; None when not even the markers fit."""
    unique = list({lines[id(e)]: None for e in chosen})
    if _fits(_measure([BEGIN, *unique, END]), limits):
        return chosen
    # Room for the left-out line at its longest (every entry left out): fewer left out
    # never makes it longer, so the block fits whatever the count turns out to be.
    used = _measure([BEGIN, _note(len(chosen)), END])
    if not _fits(used, limits):
        return None
    kept: list[PromptEntry] = []
    shown: set[str] = set()
    for e in sorted(chosen, key=_keep_rank, reverse=True):
        line = lines[id(e)]
        if line in shown:
            kept.append(e)  # it shares an item already kept: no room taken
            continue
        b, c, n = _measure([line])
        grown = (used[0] + b, used[1] + c, used[2] + n)
        if _fits(grown, limits):
            used = grown
            kept.append(e)
            shown.add(line)
    return kept


def _keep_rank(e: PromptEntry) -> tuple[float, bool, int, str]:
    return drop_rank(e.confidence, e.user, e.ts, e.id)


def _show(limits: Limits) -> str:
    parts = [
        f"{n} {unit}"
        for n, unit in (
            (limits.max_bytes, "bytes"),
            (limits.max_chars, "characters"),
            (limits.max_lines, "lines"),
        )
        if n is not None
    ]
    return "(" + ", ".join(parts) + ")"


# --- Finding the block ---------------------------------------------------------------------

# Any comment that names memsync and says begin or end, as `core.vendor_memory` skips them:
# every such line is a marker, well formed or not, so that a damaged one is refused rather
# than overlooked.
_MARK = re.compile(r"<!--.*\bmemsync\b.*\b(begin|end)\b", re.IGNORECASE)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Span:
    """Where the block is in a text: `start` is the offset of its begin marker line,
    `stop` the offset just past its end marker line (its line break included, when it
    has one), and `inner` the lines between the markers (line breaks removed)."""

    start: int
    stop: int
    inner: tuple[str, ...]
    begin_line: int
    end_line: int


def locate(text: str) -> Span | None:
    """The block of `text`, or None when it holds no memsync marker at all.

    Markers inside fenced code are text (a README may show them). Lines end in "\\n",
    "\\r\\n" or "\\r".

    Raises:
        BlockError: the markers are not exactly one begin line and one end line, each
            the marker alone on its line (`BEGIN`, `END`), begin first; the message names
            the lines.
    """
    begins: list[tuple[int, int, int]] = []  # (line number, start offset, stop offset)
    ends: list[tuple[int, int, int]] = []
    fence: str | None = None
    offset = 0
    for n, raw in enumerate(_lines(text), 1):
        line = raw.rstrip("\r\n")
        start, offset = offset, offset + len(raw)
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        if (f := _FENCE.match(line)) is not None:
            fence = f[1][0] * 3
            continue
        mark = _MARK.search(line)
        if mark is None:
            continue
        which = mark[1].lower()
        expected = BEGIN if which == "begin" else END
        if line.strip() != expected:
            raise BlockError(
                f"line {n}: a memsync {which} marker that is not the marker alone on its line"
                " (changed by hand?); fix or delete it"
            )
        (begins if which == "begin" else ends).append((n, start, offset))
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1:
        raise BlockError(
            f"{_count(begins, 'begin')} and {_count(ends, 'end')}: exactly one of each is"
            " needed; delete the extra ones"
        )
    (b, b_start, b_stop), (e, e_start, e_stop) = begins[0], ends[0]
    if e < b:
        raise BlockError(f"the end marker (line {e}) comes before the begin marker (line {b})")
    inner = tuple(x.rstrip("\r\n") for x in _lines(text[b_stop:e_start]))
    return Span(b_start, e_stop, inner, b, e)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _lines(text: str) -> list[str]:
    """The lines of `text` with their line breaks, as Markdown reads them: "\\n",
    "\\r\\n" or "\\r" only (not the other characters `str.splitlines` breaks at)."""
    return _LINE.findall(text)


def _count(marks: list[tuple[int, int, int]], which: str) -> str:
    if not marks:
        return f"no {which} marker"
    where = ", ".join(str(n) for n, _, _ in marks)
    return f"{len(marks)} {which} marker{'s' if len(marks) > 1 else ''} (line {where})"
