"""What a bridge reads from a memory and writes to it (issue 22): the live entries it
renders, the records its files' changes make, and the legacy `## Gemini Added Memories`
bullets of a `GEMINI.md`. Shared by `memsync.local.bridges` and
`memsync.local.claude_bridge`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from memsync.core.lines import classify
from memsync.core.prompt import PromptEntry, entry_of
from memsync.core.records import Record
from memsync.core.secrets import find_secrets
from memsync.core.timestamps import format_ts
from memsync.core.vendor_memory import entry_id, gemini_md
from memsync.errors import InvalidRecord, MemsyncError
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import file_lock
from memsync.local.memory import Memory
from memsync.local.reading import scan
from memsync.local.storage import append_bytes

__all__ = ["append_records", "legacy_gemini", "live_entries"]


def live_entries(mem: Memory, now: int | None = None) -> list[PromptEntry]:
    """The live entries of `mem` at `now` (default: the local clock), as a bridge renders them."""
    return [entry_of(rec) for rec in mem.view(now).records]


def append_records(mem: Memory, records: list[dict[str, Any]], where: str) -> int:
    """Append record objects to `mem` in one write (the caller holds its lock); how many.

    Raises:
        InvalidRecord: one would not be a valid record (naming `where`); none is written.
    """
    lines = []
    for obj in records:
        raw = msgspec.json.encode(obj)
        if not isinstance(classify(raw), Record):
            raise InvalidRecord(f"{where}: makes no valid record: {raw[:80]!r}")
        lines.append(raw + b"\n")
    if lines:
        append_bytes(mem.path, b"".join(lines), header=header_line(now_us()))
    return len(lines)


def legacy_gemini(
    mem: Memory,
    path: Path,
    text: str,
    *,
    home: str,
    machine: str,
    now: int | None,
    notes: list[str],
) -> tuple[int, set[str]]:
    """For the text of a `GEMINI.md` (outside memsync's block): append the bullets of
    its legacy `## Gemini Added Memories` sections that the memory does not hold, never
    held, or forgot (with the ids `memsync import --from gemini-md` gives them, scope
    `home`); return how many were appended and the ids of them all, which the file
    already shows (so the block does not show them twice). Lines that look like
    credentials are not recorded: noted in `notes`."""
    try:
        found = gemini_md(str(path), text)
    except MemsyncError:
        return 0, set()  # no such section
    ids: set[str] = set()
    records: list[dict[str, Any]] = []
    at = format_ts(now_us() if now is None else now)
    with file_lock(mem.path, mem.lock_timeout):
        index = scan([mem.path]).index
        seen = {*index.user, *index.inferred, *index.tombs, *index.superseded}
        for f in found:
            rid = entry_id("gemini-md", f.kind, home, *f.tags, f.text)
            ids.add(rid)
            if rid in seen:
                continue
            if secret := find_secrets(f.text):
                notes.append(f"{f.where}: looks like a secret ({', '.join(secret)})")
                continue
            seen.add(rid)
            records.append(
                {
                    "id": rid,
                    "kind": f.kind,
                    "text": f.text,
                    "scope": home,
                    "tags": list(f.tags),
                    "source": f"bridge:gemini-md@{machine}",
                    "confidence": 1.0,
                    "created_at": at,
                }
            )
        appended = append_records(mem, records, str(path))
    return appended, ids
