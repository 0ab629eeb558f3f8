"""What a compaction killed right after its rename leaves beside a memory file: aside
links to the old inode (rule 16), found with one directory listing. Apart from
`memsync.local.drain`, which copies their lines in under the file's lock, so that a
command that finds none (nearly always) imports no lock machinery (start-up)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["asides_of"]


def asides_of(path: Path) -> list[str]:
    """The names of the aside links beside memory file `path` (none when its folder
    cannot be listed: the command's own read of the file then says why)."""
    prefix = f".{path.name}.old-"
    try:
        return [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return []
