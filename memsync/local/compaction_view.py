"""The persistent view of the file a compaction just wrote (issue 20; SEMANTICS rule 15).

A compaction replaces a memory file by a new inode, which the store of the old one does not
describe (`memsync.local.viewstore` rejects it): without more, the first command after it
would fold the whole new file again. The compaction knows what it wrote, though: its header,
then the kept records' lines, byte for byte, in order. Folding those records where they now
lie gives the summary a fold of the new file gives (the same lines, classified by the same
`classify` when the compaction read them, folded in the same order), without parsing a line
again; the store's checks (inode, size, digest of every folded byte) are taken from the new
file itself. A compaction planned in partitions holds no kept record in memory: the new file
is folded instead (`located_index`), as the next command would have.

Written after the compaction's lock is released (merges and bridges wait for it). Lines
appended meanwhile (the drain of rule 16, a merge) lie past what the store folded: the next
command folds them. A file replaced again meanwhile is another inode: then nothing is
written. The store is only time: any error leaves it to the next command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from memsync.core.records import Located, Record
from memsync.errors import MemsyncError
from memsync.local.located import LocatedView, located_index, pack_at
from memsync.local.logs import get_logger
from memsync.local.reading import ScanResult, no_gc
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import ViewStore

__all__ = ["Written", "store_compacted"]

logger = get_logger(__name__)


class Written:
    """What a compaction wrote as the new file: its inode, the length of its header line
    (with its "\\n"), and the kept records whose lines follow, in order (None: not held in
    memory, a partitioned plan)."""

    def __init__(self, dev: int, ino: int, header: int, kept: Sequence[Record] | None) -> None:
        self.dev, self.ino, self.header, self.kept = dev, ino, header, kept


def store_compacted(store: ViewStore, path: Path, written: Written) -> None:
    """Leave in `store` the persistent view of the file `path` as the compaction `written`
    wrote it (see the module's docstring); nothing when `path` is another file now."""
    try:
        if written.kept is None:
            located_index(path, store).close()
            return
        fd = open_for_reading(path)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (written.dev, written.ino):
                return  # replaced again since: that file's store is its own reader's
            _save_written(store, path, fd, written.header, written.kept)
        finally:
            os.close(fd)
    except (OSError, MemsyncError) as exc:
        logger.info("%s: persistent view not written after compaction: %s", path, exc)


def _save_written(
    store: ViewStore, path: Path, fd: int, header: int, kept: Sequence[Record]
) -> None:
    """Fold `kept`, whose lines follow a header of `header` bytes in the file open as `fd`,
    as the first pass folds them (`located._fold`: `Located` records of file 0, in file
    order, and the entries that supersede), and save it as the file's store."""
    view = LocatedView([], ScanResult(), [path], [fd])  # `fd` is the caller's to close
    index = view.scan.index
    index.line = view.line  # a tie between two versions reads both lines (rule 7)
    add = index.add
    superseding: list[tuple[str, int]] = []
    view.scan.superseding = superseding
    offset = header
    with no_gc():  # a million records hold no cycles
        for r in kept:
            length = len(r.raw)
            at = pack_at(0, offset, length)
            add(Located(b"", r.id, r.ts, r.deleted, r.user, r.supersedes, r.expires, at, 0))
            if r.supersedes is not None and not r.deleted:
                superseding.append((r.supersedes, at))
            offset += length + 1
        # The header is line 1, the kept lines 2 to len(kept) + 1: the next is after them.
        store.save(path, fd, view.scan, offset, len(kept) + 2, 0, view.lines_of)
