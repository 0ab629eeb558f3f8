"""Checks on the file a command writes, made before anything is written (issue 24, item 6).

A typo or a swapped argument must not cost a memory: `export --markdown me.jsonl me.jsonl`
would replace the memory with Markdown, `import --from mcp-memory a.jsonl a.jsonl` append
records into its own source, and `add notes.txt ...` append JSON to a text file. So a
command refuses, in one line and before writing:

- an output that is one of its inputs: the same file by device and inode, so a symlink or
  another spelling of the path is caught too (`require_not_input`);
- a memory target that exists and is not a memory file: no header and no valid record
  among its first lines (`require_memory_target`); an empty file is a new memory;
- a Markdown output that is a memory file (`require_not_memory`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from memsync.core.lines import MAX_LINE_BYTES, Header, classify, without_bom
from memsync.core.records import Record
from memsync.errors import UnsupportedFormat, UsageError

__all__ = [
    "looks_like_memory",
    "require_memory_target",
    "require_not_input",
    "require_not_memory",
    "same_file",
]

_PEEK_BYTES = 4 * MAX_LINE_BYTES
"""How far `looks_like_memory` reads: a memory file has its header or a record (each at
most `MAX_LINE_BYTES`) long before, whatever bad lines precede it."""


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether `a` and `b` are one existing file (links followed): same device and inode."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def looks_like_memory(path: Path) -> bool | None:
    """Whether existing file `path` is a memory file: a header (rule 2) or a valid record
    (rules 3, 4) among its first `_PEEK_BYTES`; None when it holds nothing but blanks (a
    new, empty memory).

    Raises:
        OSError: it cannot be read.
    """
    blank = True
    read = 0
    with open(path, "rb") as f:
        while read < _PEEK_BYTES:
            # A file that starts with its header (every file memsync makes) is one line read.
            raw = f.readline(MAX_LINE_BYTES + 2)
            if not raw:
                break
            line = raw.rstrip(b"\r\n")
            if not read:
                line = without_bom(line)  # rule 1: a byte order mark is no part of line 1
            read += len(raw)
            if not line.strip():
                continue
            blank = False
            try:
                parsed = classify(line, source=str(path))
            except UnsupportedFormat:  # a header of another format version: a memory file
                return True
            if isinstance(parsed, Header | Record):
                return True
    return None if blank and read < _PEEK_BYTES else False


def require_memory_target(path: str | os.PathLike[str]) -> None:
    """Refuse to write records into `path` when it exists and is not a memory file.

    Raises:
        UsageError: naming `path`; nothing was written.
    """
    p = Path(path).expanduser()
    if p.is_file() and looks_like_memory(p) is False:
        raise UsageError(f"{p}: not a memory file (no header and no valid record); nothing written")


def require_not_input(
    out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]
) -> None:
    """Refuse an output that is one of `inputs` (through a link or another spelling too).

    Raises:
        UsageError: naming both; nothing was written.
    """
    for src in inputs:
        if same_file(out, src):
            shown = "" if str(out) == str(src) else f" ({src})"
            raise UsageError(f"{out}: is the input file{shown}; give another output")


def require_not_memory(out: str | os.PathLike[str]) -> None:
    """Refuse to replace a memory file with something else (a Markdown export).

    Raises:
        UsageError: naming `out`; nothing was written.
    """
    p = Path(out).expanduser()
    if p.is_file() and looks_like_memory(p):
        raise UsageError(f"{p}: is a memory file; give another output")
