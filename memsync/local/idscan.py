"""Scans of a memory file for the records of one id (`Memory.forget` and `supersede`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from memsync.core.lines import classify
from memsync.core.records import Record

if TYPE_CHECKING:
    from memsync.local.statedir import StateDirLike

__all__ = ["Known", "Newest", "naming", "stored_newest"]


def naming(lines: list[bytes], rid: str, name: str) -> Iterator[Record]:
    """The records of `rid` among `lines` (only lines holding its JSON spelling parsed)."""
    needle = msgspec.json.encode(rid)[1:-1]
    if needle in b"\n".join(lines):
        for raw in lines:
            rec = classify(raw, source=name) if needle in raw else None
            if type(rec) is Record and rec.id == rid:
                yield rec


def stored_newest(
    path: Path, fd: int, rid: str, state_dir: StateDirLike | None = None
) -> tuple[int | None, int] | None:
    """`ViewStore.newest` in `state_dir` (None: the default one, where the command line
    keeps the persistent views); None without one (or when it cannot be read)."""
    from memsync.local.statedir import StateDir  # not on `add`'s path (start-up)
    from memsync.local.viewstore import ViewStore

    try:
        return ViewStore(StateDir.of(state_dir)).newest(path, fd, rid)
    except OSError:
        return None


Known = tuple[int | None, int, int]
"""What a reader's view holds of one id: its newest `created_at` (None: no record), the
file's inode, and the offset the view read to (`Memory.forget_record`)."""


class Newest(msgspec.Struct, frozen=True):
    """A scan of a file for one id: its newest `created_at` (None: no record), and the
    file's inode and the offset the scan read to."""

    newest: int | None
    ino: int
    end: int
