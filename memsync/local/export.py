"""`memsync export --markdown`: a readable MEMORY.md-style summary of a memory's view.

The summary lists the live entries (SEMANTICS rule 12: forgotten, superseded and expired
ones are not there), grouped by kind in the prompt's order (the person's entries under
their own heading first), then by scope (global first, then the others sorted), each entry
on one line with its id so a person can `memsync forget` it. It is for reading, not a format: `memsync` never reads it back.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from memsync.core.prompt import PROMPT_KIND_ORDER
from memsync.core.records import Record
from memsync.core.render import md_code, md_text
from memsync.core.timestamps import format_ts
from memsync.local.reading import view_of
from memsync.local.storage import atomic_replace, require_file
from memsync.local.targets import require_not_input, require_not_memory

__all__ = ["export_markdown", "render_markdown", "write_markdown"]

_TITLES = {
    "preference": "Preferences",
    "avoid": "Avoid",
    "lesson": "Lessons",
    "fact": "Facts",
    "source": "Sources",
}


def render_markdown(records: Iterable[Record], title: str = "Memory") -> str:
    """The Markdown summary of live records (the view's order within each group).

    Every record string goes through `memsync.core.render` (SEMANTICS rule 17): texts and
    scopes as escaped inline text, ids and tags as code spans, so that no record can make a
    heading, a list item, a link, an image or a terminal escape. What the person said
    (`source: "user"`) is under its own heading, "(said by the person)", written by
    memsync: no record's text can put an entry there.
    """
    groups: dict[tuple[str, bool], dict[str, list[tuple[Record, dict[str, object]]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    count = 0
    for rec in records:
        if rec.deleted:
            continue
        obj = rec.fields()
        groups[(str(obj["kind"]), rec.user)][str(obj.get("scope", "global"))].append((rec, obj))
        count += 1
    out = [f"# {md_text(title)}", "", f"{count} live entr{'y' if count == 1 else 'ies'}.", ""]
    for kind in PROMPT_KIND_ORDER:
        for user in (True, False):
            scopes = groups.get((kind, user))
            if not scopes:
                continue
            out += [f"## {_TITLES[kind]}{_BY_PERSON if user else ''}", ""]
            for scope in sorted(scopes, key=lambda s: (s != "global", s)):
                out += [f"### {md_text(scope)}", ""]
                out += [_item(rec, obj) for rec, obj in scopes[scope]]
                out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


_BY_PERSON = " (said by the person)"


def _item(rec: Record, obj: dict[str, object]) -> str:
    """One entry's list item: its text, memsync's notes, then its id (a code span)."""
    notes = [format_ts(rec.ts)[:10]]
    conf = float(obj.get("confidence", 1.0))  # type: ignore[arg-type]
    if conf < 1.0:
        notes.append(f"confidence {conf:g}")
    tags = obj.get("tags") or []
    if tags:
        notes.append("tags: " + ", ".join(md_code(str(t)) for t in tags))  # type: ignore[attr-defined]
    if rec.expires is not None:
        notes.append(f"until {format_ts(rec.expires)[:10]}")
    return f"- {md_text(str(obj['text']))} ({'; '.join(notes)}) {md_code(rec.id)}"


def export_markdown(path: str | os.PathLike[str], *, now: int | None = None) -> str:
    """The Markdown summary of memory file `path`'s view at `now` (default: the clock)."""
    p = Path(path).expanduser()
    require_file(p)
    return render_markdown(view_of([p], now).records, title=f"Memory: {p.stem}")


def write_markdown(
    path: str | os.PathLike[str], out: str | os.PathLike[str], *, now: int | None = None
) -> int:
    """Write the summary of `path` to `out` (atomically, mode 0600: a memory is personal);
    return the number of characters written.

    Raises:
        UsageError: `out` is `path` (by device and inode) or another memory file: a
            memory is never replaced by its summary (issue 24, item 6).
    """
    require_not_input(out, [path])
    require_not_memory(out)
    text = export_markdown(path, now=now)
    atomic_replace(Path(out).expanduser(), text.encode("utf-8"))
    return len(text)
