"""Memories written the way Claude Code's auto memory keeps them (issue 22, item 2). Pure:
entries in, file names and bytes out.

Claude Code's auto memory (`~/.claude/projects/<project>/memory/`) is a folder of one
Markdown file per memory, each with a frontmatter of `name`, `description` and `type`
(`user`, `feedback`, `project`, `reference`), and a `MEMORY.md` index of one-line
pointers (`- [Title](file.md) — hook`), of which Claude loads the first 200 lines or
25 KB (see shared/research/vendor-formats.md).

- `memory_file` renders one entry as such a file, named `memsync_<id>.md` (so memsync
  knows its own files from Claude's); every record string is folded and escaped as
  Markdown with `@` escaped (SEMANTICS rule 17: no text can forge a frontmatter, a
  heading or an import), frontmatter values quoted.
- `index_block` renders the pointers to those files as memsync's block of `MEMORY.md`
  (`core.bridge_block` markers: Claude strips HTML comments before loading the index),
  as many as the index's limit leaves room for, best first, and says how many it left
  out. Entries left out get no file either (Claude reads a memory file only through the
  index).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memsync.core import render
from memsync.core.bridge_block import BEGIN, END, Limits, Selection
from memsync.core.prompt import PromptEntry, drop_rank

__all__ = ["OURS", "TYPES", "IndexBlock", "file_name", "index_block", "memory_file"]

OURS = re.compile(r"^memsync_[A-Za-z0-9_-]{1,64}\.md$")
"""The name of a memory file memsync wrote."""

TYPES = {
    "preference": "user",
    "avoid": "feedback",
    "lesson": "feedback",
    "fact": "project",
    "source": "reference",
}
"""A memsync kind as Claude Code's memory `type`."""

_SAFE_ID = re.compile(r"^[a-z0-9_-]{1,56}$")
"""Ids kept as they are in a file's name: lowercase, so that two names never differ only
in case (a case-insensitive file system would make them one file: issue 23, item 2)."""
_NAME_CHARS = 60
_HOOK_CHARS = 120


def file_name(rid: str) -> str:
    """The memory file of the entry with id `rid`: `memsync_<id>.md`, or a hash of the id
    where it holds other characters than lowercase letters, digits, `_` and `-`."""
    if _SAFE_ID.match(rid) is None:
        rid = "h" + hashlib.blake2b(rid.encode("utf-8"), digest_size=8).hexdigest()
    return f"memsync_{rid}.md"


def _md(text: str) -> str:
    return render.md_text(text).replace("@", "\\@")


def _cut(text: str, n: int) -> str:
    text = " ".join(render.fold(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def memory_file(e: PromptEntry) -> str:
    """The text of entry `e`'s memory file: frontmatter (`name`, `description`, `type`;
    values as JSON strings, which YAML reads as the same strings, `@` as U+FF20) and the
    entry's text."""
    # No `@` in the frontmatter either (an import to Claude): the full-width one reads the
    # same to a person, and the body keeps the text's own, escaped.
    name = _cut(e.text, _NAME_CHARS).replace("@", "\uff20")
    hook = _cut(e.text, _HOOK_CHARS).replace("@", "\uff20")
    return (
        "---\n"
        f"name: {json.dumps(name, ensure_ascii=False)}\n"
        f"description: {json.dumps(hook, ensure_ascii=False)}\n"
        f"type: {TYPES[e.kind]}\n"
        "---\n\n"
        f"{_md(e.text)}\n"
    )


def _pointer(e: PromptEntry) -> str:
    return f"- [{_md(_cut(e.text, _NAME_CHARS))}]({file_name(e.id)}) — {_md(_cut(e.text, _HOOK_CHARS))}"


@dataclass(frozen=True, slots=True)
class IndexBlock:
    """memsync's block of `MEMORY.md` (markers included, "\\n" line ends), the entries it
    points to (a file each), how many selected entries it left out, and the ids withheld
    as credentials."""

    text: str
    entries: tuple[PromptEntry, ...]
    left_out: int
    withheld: tuple[str, ...]


def index_block(entries: Iterable[PromptEntry], selection: Selection, room: Limits) -> IndexBlock:
    """The pointers to the entries `selection` takes, best first (`drop_rank`: the
    highest confidence, the person's, the newest), as many as `room` (what `MEMORY.md`'s
    limit leaves besides Claude's own lines) and the selection's budget hold, with the
    markers and a left-out line; in a fixed order (kind, then age, then id) so that the
    same entries give the same bytes."""
    room = selection.budget.within(room)
    chosen, withheld = selection.taken(entries)
    chosen.sort(key=lambda e: drop_rank(e.confidence, e.user, e.ts, e.id), reverse=True)
    note = f"<!-- memsync: {len(chosen)} more entries left out to fit the index -->"
    used = [len(BEGIN) + len(END) + len(note) + 3, 3]  # bytes (ASCII markers), lines
    kept: list[PromptEntry] = []
    for e in chosen:
        line = _pointer(e)
        size = len(line.encode("utf-8")) + 1
        if _within(used[0] + size, used[1] + 1, room):
            used = [used[0] + size, used[1] + 1]
            kept.append(e)
    kept.sort(key=lambda e: (list(TYPES).index(e.kind), e.ts, e.id))
    left_out = len(chosen) - len(kept)
    lines = [BEGIN, *map(_pointer, kept)]
    if left_out:
        lines.append(f"<!-- memsync: {left_out} more entries left out to fit the index -->")
    lines.append(END)
    return IndexBlock("\n".join(lines) + "\n", tuple(kept), left_out, tuple(sorted(withheld)))


def _within(nbytes: int, nlines: int, room: Limits) -> bool:
    return (
        (room.max_bytes is None or nbytes <= room.max_bytes)
        and (room.max_chars is None or nbytes <= room.max_chars)
        and (room.max_lines is None or nlines <= room.max_lines)
    )
