"""`memsync import`: bring in the reference MCP memory server's graph (`--from mcp-memory`)
or the Markdown memories of other agents (`--from claude-auto-memory | gemini-md |
agents-md`, parsed by `memsync.core.vendor_memory`; issue 22, item 7).

That server (modelcontextprotocol/servers, `src/memory`) keeps one JSON Lines file of
entities `{"type": "entity", "name", "entityType", "observations": [...]}` and relations
`{"type": "relation", "from", "to", "relationType"}`. Each observation becomes a `fact`
scoped `entity:<name>`; each relation becomes a `fact` "<from> <relationType> <to>" scoped
to its `from` entity.

Importing is idempotent: an imported entry's id is a hash of what it says and its
`created_at` a fixed instant, so the same observation imported again has the same key
(SEMANTICS rule 6) and is not appended twice. An entry forgotten since stays forgotten
(issue 24, item 7): one the file's tombstones or supersessions remove (rules 8 and 10) is
dead on arrival and not appended, and one this machine's import ledger (in the state
directory, `StateDir.import_ledger`) says the file held is not appended again either, even
once compaction has dropped its line and, past the horizon, its tombstone. The source file
is checked whole before anything is appended: one bad line stops the import, naming the
file and line.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from memsync.core.claude_files import OURS
from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.secrets import find_secrets
from memsync.core.vendor_memory import (
    FORMATS,
    agents_md,
    claude_index,
    claude_memory,
    entry_id,
    gemini_md,
)
from memsync.errors import InvalidRecord, MemsyncError, UsageError
from memsync.local.fresh import header_line
from memsync.local.lock import file_lock
from memsync.local.memory import Memory
from memsync.local.reading import scan
from memsync.local.statedir import StateDir, StateDirLike
from memsync.local.storage import append_bytes, require_file, utf8_text
from memsync.local.targets import require_memory_target, require_not_input

__all__ = [
    "IMPORTED_AT",
    "SOURCE",
    "VENDOR_IMPORTED_AT",
    "ImportResult",
    "import_mcp_memory",
    "import_vendor",
    "mcp_memory_records",
    "vendor_records",
]

IMPORTED_AT = "2024-11-25T00:00:00Z"
"""The `created_at` of every imported entry: fixed (the reference server's first release),
so that importing twice gives the same keys. Anything written later beats it (rule 9)."""

SOURCE = "mcp-memory"

VENDOR_IMPORTED_AT = "2025-01-01T00:00:00Z"
"""The `created_at` of every entry imported from another agent's Markdown: fixed, as
`IMPORTED_AT`, so that the same memory has the same key on every machine and every run."""


@dataclass
class ImportResult:
    """What an import did: lines appended, entries already there, entries forgotten since
    they were imported (not imported again), lines skipped (each as "file:line: why")."""

    appended: int = 0
    present: int = 0
    skipped: list[str] = field(default_factory=list)
    forgotten: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "appended": self.appended,
            "present": self.present,
            "forgotten": self.forgotten,
            "skipped": self.skipped,
        }


_entry_id = entry_id


def _entry(
    rid: str, text: str, scope: str, tags: list[str], *, kind: str = "fact", source: str = SOURCE
) -> dict[str, Any]:
    return {
        "id": rid,
        "kind": kind,
        "text": text,
        "scope": scope,
        "tags": tags,
        "source": source,
        "confidence": 1.0,
        "created_at": IMPORTED_AT,
    }


def _utf8(value: str, where: str, key: str) -> str:
    """`value`, if it can be written as UTF-8: JSON's `\\ud800` escapes decode to a lone
    surrogate, which no memory file can hold (issue 24, item 13).

    Raises:
        MemsyncError: naming the line and key.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MemsyncError(
            f"{where}: key {key!r} holds a lone surrogate (not Unicode text)"
        ) from None
    return value


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise MemsyncError(f"{where}: key {key!r} must be a non-empty string")
    return _utf8(value, where, key)


def _line_object(raw: bytes, where: str, first: bool) -> Any:
    """The JSON value of one source line.

    Raises:
        MemsyncError: the line is not UTF-8, not JSON, or nested too deep to read (one
            line naming `where`, never a traceback: issue 24, item 13).
    """
    if first and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte order mark, as some editors save: not part of the JSON
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemsyncError(
            f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    try:
        return json.loads(line)
    except RecursionError:
        raise MemsyncError(f"{where}: JSON nested too deep to read") from None
    except ValueError as exc:
        raise MemsyncError(f"{where}: not JSON ({exc})") from None


def mcp_memory_records(src: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """("file:line", entry object) for each observation and relation of `src` (UTF-8,
    with or without a byte order mark).

    Raises:
        MemsyncError: a line is not UTF-8, not JSON, nested too deep, not an object, or
            lacks a key it needs (the message names the file, line and key).
    """
    with open(src, "rb") as f:
        for n, raw in enumerate(f, 1):
            where = f"{src}:{n}"
            if not raw.strip():
                continue
            obj = _line_object(raw, where, n == 1)
            if not isinstance(obj, dict):
                raise MemsyncError(f"{where}: not a JSON object")
            kind = obj.get("type")
            if kind == "entity":
                name = _text(obj, "name", where)
                etype = _text(obj, "entityType", where)
                observations = obj.get("observations", [])
                if not isinstance(observations, list):
                    raise MemsyncError(f"{where}: key 'observations' must be a list")
                for i, o in enumerate(observations):
                    if not isinstance(o, str):
                        raise MemsyncError(f"{where}: observations[{i}] must be a string")
                    if not o.strip():
                        continue
                    _utf8(o, where, f"observations[{i}]")
                    rid = _entry_id("entity", name, o)
                    yield where, _entry(rid, o, f"entity:{name}", [SOURCE, etype])
            elif kind == "relation":
                a, b = _text(obj, "from", where), _text(obj, "to", where)
                rel = _text(obj, "relationType", where)
                rid = _entry_id("relation", a, rel, b)
                yield where, _entry(rid, f"{a} {rel} {b}", f"entity:{a}", [SOURCE, "relation"])
            else:
                raise MemsyncError(f'{where}: key \'type\' must be "entity" or "relation"')


def import_mcp_memory(
    src: str | os.PathLike[str],
    into: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    state_dir: StateDirLike | None = None,
) -> ImportResult:
    """Append to memory file `into` (created if missing) the entries of the reference MCP
    memory server's file `src` that it does not hold yet and that were not forgotten since
    an earlier import (the module docstring); return what was done.

    Observations that look like credentials are skipped and listed (never stored).
    `state_dir` holds the import ledger (default: memsync's state directory).

    Raises:
        MemsyncError: `src` has a bad line (nothing is appended then).
        UsageError: `into` is `src` (by device and inode), or exists and is not a memory
            file (nothing is appended).
        FileNotFoundError: `src` does not exist.
    """
    source = Path(src).expanduser()
    require_file(source)
    # Issue 24, item 6: never records appended to their own source or to a non-memory file.
    require_not_input(into, [source])
    require_memory_target(into)
    return _import(
        mcp_memory_records(source), source, into, dry_run=dry_run, state=StateDir.of(state_dir)
    )


def _import(
    items: Iterable[tuple[str, dict[str, Any]]],
    source: Path,
    into: str | os.PathLike[str],
    *,
    dry_run: bool,
    state: StateDir,
) -> ImportResult:
    """Append to `into` the entry objects of `items` whose key it does not hold yet (rule
    6) and that were not forgotten since (`_forgotten`); each one that looks like a
    credential is skipped and listed, never stored. The keys found or appended go to the
    import ledger of `into`."""
    result = ImportResult()
    lines: list[tuple[bytes, Record]] = []
    seen: set[tuple[str, int]] = set()
    for where, obj in items:
        found = find_secrets("\n".join([obj["text"], obj["scope"], *obj["tags"]]))
        if found:
            result.skipped.append(f"{where}: looks like a secret ({', '.join(found)})")
            continue
        raw = msgspec.json.encode(obj)
        rec = classify(raw, source=str(source))
        if not isinstance(rec, Record):
            raise InvalidRecord(f"{where}: cannot be imported as a valid record")
        if rec.key not in seen:  # a memory repeated in the source is one entry
            seen.add(rec.key)
            lines.append((raw, rec))
    if dry_run and not Path(into).expanduser().exists():
        result.appended = len(lines)  # a dry run creates no file either
        return result
    mem = Memory.open(into)
    ledger = state.import_ledger(mem.path)
    with file_lock(mem.path, mem.lock_timeout):
        held = _Held()
        scan([mem.path], visit=lambda _f, _n, r: held.add(r))
        imported = _read_ledger(ledger)
        new = []
        for raw, rec in lines:
            if rec.key in held.keys:
                result.present += 1
            elif rec.key in imported or held.removes(rec):
                result.forgotten += 1
            else:
                new.append(raw)
        result.appended = len(new)
        if not dry_run:
            if new:
                append_bytes(mem.path, b"".join(r + b"\n" for r in new), header=header_line(0))
            _add_to_ledger(state, ledger, [rec.key for _, rec in lines if rec.key not in imported])
    return result


class _Held:
    """What a memory file holds, as far as an import cares: its records' keys, and what
    removes an id: its latest tombstone (rule 8) and supersession (rule 10)."""

    def __init__(self) -> None:
        self.keys: set[tuple[str, int]] = set()
        self.tombstone: dict[str, int] = {}
        self.superseded: set[str] = set()

    def add(self, rec: Record) -> None:
        self.keys.add(rec.key)
        if rec.deleted:
            self.tombstone[rec.id] = max(rec.ts, self.tombstone.get(rec.id, rec.ts))
        elif rec.supersedes is not None:
            self.superseded.add(rec.supersedes)

    def removes(self, rec: Record) -> bool:
        """Whether `rec` would be dead on arrival: forgotten or superseded here."""
        return rec.id in self.superseded or self.tombstone.get(rec.id, -1) >= rec.ts


def _read_ledger(ledger: Path) -> set[tuple[str, int]]:
    """The keys of an import ledger (`<id> <µs>` lines; a torn or unreadable line, as a
    crash may leave, is skipped: the ledger only ever holds back re-imports)."""
    try:
        data = ledger.read_bytes()
    except FileNotFoundError:
        return set()
    keys = set()
    for line in data.split(b"\n")[:-1]:  # the last piece: empty, or a torn line
        rid, _, ts = line.decode("utf-8", "replace").rpartition(" ")
        if rid and ts.isdigit():
            keys.add((rid, int(ts)))
    return keys


def _add_to_ledger(state: StateDir, ledger: Path, keys: list[tuple[str, int]]) -> None:
    if keys:
        lines = "".join(f"{rid} {ts}\n" for rid, ts in dict.fromkeys(keys))
        append_bytes(state.prepared(ledger), lines.encode("utf-8"))


def _read_text(path: Path) -> str:
    """A Markdown file's text (UTF-8).

    Raises:
        MemsyncError: it is not UTF-8, naming the file and line.
    """
    return utf8_text(path.read_bytes(), path)


def vendor_records(
    fmt: str, src: Path, scope: str = "global"
) -> tuple[list[Path], list[tuple[str, dict[str, Any]]]]:
    """The files read and ("file:line", entry object) for each memory of `src` in format
    `fmt` (one of `FORMATS`: a folder for `claude-auto-memory`, a file for the others).

    Raises:
        MemsyncError: a file is not UTF-8 or not of the format (one line naming it).
        FileNotFoundError, NotADirectoryError: `src` is missing or of the wrong type.
    """
    if fmt == "claude-auto-memory":
        if not src.is_dir():
            code = errno.ENOTDIR if src.exists() else errno.ENOENT
            raise OSError(code, os.strerror(code), str(src))
        if (src / "memory").is_dir() and not any(src.glob("*.md")):
            src = src / "memory"  # the project's folder was given, not its memory folder
        # memsync's own files there (a claude-auto-memory bridge's) are never read back.
        files = sorted(
            p
            for p in src.iterdir()
            if p.suffix == ".md" and p.is_file() and OURS.match(p.name) is None
        )
        found = [
            item
            for p in files
            for item in (
                claude_index(str(p), _read_text(p))
                if p.name == "MEMORY.md"
                else claude_memory(str(p), _read_text(p))
            )
        ]
    else:
        require_file(src)
        files = [src]
        parse = gemini_md if fmt == "gemini-md" else agents_md
        found = parse(str(src), _read_text(src))
    items = []
    for f in found:
        rid = entry_id(fmt, f.kind, scope, *f.tags, f.text)
        obj = _entry(rid, f.text, scope, list(f.tags), kind=f.kind, source=fmt)
        items.append((f.where, obj | {"created_at": VENDOR_IMPORTED_AT}))
    return files, items


def import_vendor(
    fmt: str,
    src: str | os.PathLike[str],
    into: str | os.PathLike[str],
    *,
    scope: str = "global",
    dry_run: bool = False,
    state_dir: StateDirLike | None = None,
) -> ImportResult:
    """Append to memory file `into` (created if missing) the memories another agent keeps
    in Markdown (`fmt`: see `memsync.core.vendor_memory`) that it does not hold yet.

    Idempotent, as the mcp-memory import: the same memory imported again, here or on
    another machine, has the same key; one forgotten since stays forgotten (the module
    docstring; `state_dir` holds the import ledger, default memsync's state directory).

    Raises:
        MemsyncError: a file is not UTF-8 or not of the format (nothing is appended).
        UsageError: `into` is one of the files read, or is not a memory file.
        OSError: `src` is missing or of the wrong type.
    """
    if fmt not in FORMATS:
        raise UsageError(f"import: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    source = Path(src).expanduser()
    files, items = vendor_records(fmt, source, scope)
    require_not_input(into, files)
    require_memory_target(into)
    return _import(items, source, into, dry_run=dry_run, state=StateDir.of(state_dir))
