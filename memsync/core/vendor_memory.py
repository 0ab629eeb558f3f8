"""The memories other agents keep in Markdown, read as entries (issue 22, item 7). Pure:
text in, `Found` items out; `memsync.local.importers` reads the files and appends.

Formats (see shared/research/vendor-formats.md for the sources):

- `claude-auto-memory`: Claude Code's auto memory folder
  (`~/.claude/projects/<project>/memory/`): one Markdown file per memory, with a
  frontmatter of `name`, `description`, `type` (`user`, `feedback`, `project`,
  `reference`) and maybe `modified`; the memory is the body (the description when the body
  is empty). `MEMORY.md` is the index: its pointer lines (`- [Title](file.md) ...`) are
  left alone (the files they point to are read), other bullets are memories too.
- `gemini-md`: the bullets of every `## Gemini Added Memories` section of a `GEMINI.md`
  (what Gemini CLI's `save_memory` wrote up to v0.43: `- <fact>`, the section running to
  the next line starting `## `). Forks write `## Qwen Added Memories`: read as well.
- `agents-md`: an `AGENTS.md` (free Markdown, no schema): each list item and each
  paragraph is one standing instruction, tagged with the heading above it. Headings,
  fenced code, tables and HTML comments are not memories; neither is a block between
  memsync's own begin and end markers (never ingest our own rendering).

A memory's text is kept with its whitespace folded (the same memory written with other
spacing is the same memory), so that its id, a hash of what the entry says, is the same
on every machine (rule 6: one key, so two machines never make two records of it).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memsync.errors import MemsyncError

__all__ = [
    "CLAUDE_KINDS",
    "FORMATS",
    "Found",
    "agents_md",
    "claude_index",
    "claude_memory",
    "entry_id",
    "gemini_md",
]

FORMATS = ("claude-auto-memory", "gemini-md", "agents-md")

CLAUDE_KINDS = {
    "user": "preference",
    "feedback": "lesson",
    "project": "fact",
    "reference": "source",
}
"""Claude Code's memory `type` as a memsync `kind` (an unknown or missing type: `fact`)."""

_MAX_TAG = 80


@dataclass(frozen=True, slots=True)
class Found:
    """One memory found in a file: where ("file:line"), its kind, text and tags."""

    where: str
    kind: str
    text: str
    tags: tuple[str, ...]


def entry_id(*parts: str) -> str:
    """A deterministic 12-hex-digit id from what the entry says."""
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=6).hexdigest()


def _fold(text: str) -> str:
    """One line: runs of whitespace (newlines too) as one space, none at the ends."""
    return " ".join(text.split())


def _block(text: str) -> str:
    """A multi-line memory: trailing spaces dropped, blank-line runs as one, no blank
    lines at the ends (the same memory saved by another editor stays the same text)."""
    lines = [line.rstrip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _lines(text: str) -> list[str]:
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _tag(text: str) -> str:
    tag = _fold(text)
    return tag if len(tag) <= _MAX_TAG else tag[: _MAX_TAG - 1] + "…"


# --- Claude Code's auto memory ---------------------------------------------------------

_KEY = re.compile(r"^([A-Za-z_][\w-]*):\s*(.*)$")


def _frontmatter(lines: list[str], name: str) -> tuple[dict[str, str], int]:
    """The `key: value` fields of a frontmatter and the index of the body's first line
    (0 when the file has none). Values lose one pair of surrounding quotes."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    fields: dict[str, str] = {}
    for i, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            return fields, i + 1
        m = _KEY.match(line)
        if m is not None:
            value = m[2].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            fields[m[1]] = value
    raise MemsyncError(f"{name}:1: the frontmatter opened with '---' is never closed")


def claude_memory(name: str, text: str) -> list[Found]:
    """The memory of one auto-memory file (`name` names it in `where`): its body, or its
    description when the body is empty; none when both are.

    Raises:
        MemsyncError: a frontmatter is never closed.
    """
    lines = _lines(text)
    fields, start = _frontmatter(lines, name)
    body = _block("\n".join(lines[start:]))
    where = f"{name}:{start + 1}"
    if not body:
        body = _fold(fields.get("description", ""))
        where = f"{name}:1"
    if not body:
        return []
    kind_of = fields.get("type", "").strip().lower()
    tags = ("claude-auto-memory", *((_tag(kind_of),) if kind_of else ()))
    return [Found(where, CLAUDE_KINDS.get(kind_of, "fact"), body, tags)]


_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(.*)$")
_POINTER = re.compile(r"^\[[^\]]*\]\(([^)\s]+)\)")


def claude_index(name: str, text: str) -> list[Found]:
    """The bullets of a `MEMORY.md` that are not pointers to a memory file (a person's
    hand-written lines); the pointers are left alone: the files they name are read."""
    found = []
    for n, line in enumerate(_lines(text), 1):
        m = _BULLET.match(line)
        if m is None:
            continue
        item = m[1].strip()
        pointer = _POINTER.match(item)
        if pointer is not None and pointer[1].split("#")[0].endswith(".md"):
            continue
        if _fold(item):
            found.append(Found(f"{name}:{n}", "fact", _fold(item), ("claude-auto-memory",)))
    return found


# --- Gemini CLI's legacy section ---------------------------------------------------------

_GEMINI = re.compile(r"^## (?:Gemini|Qwen) Added Memories\s*$")


def gemini_md(name: str, text: str) -> list[Found]:
    """The bullets of every `## Gemini Added Memories` section.

    Raises:
        MemsyncError: the file has no such section.
    """
    found = []
    inside = seen = False
    for n, line in enumerate(_lines(text), 1):
        if _GEMINI.match(line):
            inside = seen = True
            continue
        if line.startswith("## "):
            inside = False
        if not inside:
            continue
        m = _BULLET.match(line)
        if m is not None and _fold(m[1]):
            found.append(Found(f"{name}:{n}", "fact", _fold(m[1]), ("gemini-md",)))
    if not seen:
        raise MemsyncError(f"{name}: no '## Gemini Added Memories' section (nothing to import)")
    return found


# --- AGENTS.md -------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_UNDERLINE = re.compile(r"^(=+|-+|\*{3,}|_{3,})$")
_OURS = re.compile(r"<!--.*\bmemsync\b.*\b(begin|end)\b", re.IGNORECASE)


class _Paragraphs:
    """Paragraphs and list items being gathered: each one a memory."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[Found] = []
        self.parts: list[str] = []
        self.start = 0
        self.heading = ""
        self.listed = False

    def flush(self) -> None:
        text = _fold(" ".join(self.parts))
        if text:
            tags = ("agents-md", *((self.heading,) if self.heading else ()))
            self.found.append(Found(f"{self.name}:{self.start}", "preference", text, tags))
        self.parts = []

    def add(self, n: int, text: str, *, new: bool) -> None:
        """A line of text: a list item (`new`) starts a memory, other lines continue one."""
        if new or not self.parts:
            self.flush()
            self.start = n
            self.listed = new
        self.parts.append(text)


def agents_md(name: str, text: str) -> list[Found]:
    """Each list item and paragraph of an `AGENTS.md`, tagged with its heading."""
    out = _Paragraphs(name)
    fence: str | None = None
    comment = ours = False
    lines = _lines(text)
    try:
        _, start = _frontmatter(lines, name)  # the draft v1.1 frontmatter: no memory
    except MemsyncError:
        start = 0  # a lone "---" first: a thematic break
    for n, line in enumerate(lines[start:], start + 1):
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        if (mark := _OURS.search(line)) is not None:
            out.flush()
            ours = mark[1].lower() == "begin"
            continue
        if ours:
            continue
        if comment or line.lstrip().startswith("<!--"):
            out.flush()
            comment = "-->" not in line
            continue
        if (m := _FENCE.match(line)) is not None:
            out.flush()
            fence = m[1][0] * 3
            continue
        if (h := _HEADING.match(line)) is not None:
            out.flush()
            out.heading = _tag(h[2])
            continue
        stripped = line.strip()
        if _UNDERLINE.match(stripped):
            if out.parts and not out.listed:  # a setext heading: the paragraph was its text
                out.heading = _tag(" ".join(out.parts))
                out.parts = []
            out.flush()
            continue
        if not stripped or stripped.startswith("|"):
            out.flush()
            continue
        if (b := _BULLET.match(line)) is not None:
            out.add(n, b[1], new=True)
        else:
            out.add(n, stripped, new=False)
    out.flush()
    return out.found
