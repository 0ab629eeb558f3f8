"""Syncing one bridged Markdown file with a memory (issue 22, items 2 to 4): what the
person changed in memsync's block comes in as records, then the block is rendered again
from the view and written back, everything outside it byte for byte as it was.

`sync_bridge`, for a file of format `agents-md`, `claude-md`, `gemini-md` or `markdown`:

1. read the file through its links (`bridge_files.read_bridged`); find the block
   (`core.bridge_block.locate`): damaged markers are refused with the reason and the
   file is left alone;
2. read the block's edits against what memsync rendered there last (kept in the state
   directory, `StateDir.bridge_rendered`; `core.bridge_edits.diff_block`): an edited line
   supersedes, a deleted line tombstones, an added line is an entry, appended to the
   memory with `source` "bridge:<format>@<machine>" and ids derived from what they say.
   Lines that look like credentials are withheld and reported. A vanished or reshaped
   block is no change: it is rendered again and the result says so. Of a block memsync
   has no record of rendering here, only lines no record ever said are taken (as added);
3. render the view's selection (`core.bridge_block.render_block`) within the format's
   limit (for `agents-md`, what is left of Codex's 32 KiB after the file's other bytes)
   and put it where the block was, or, the first time, at the top of the file (after a
   frontmatter), in the file's own line endings;
   For a `gemini-md` file, the bullets of its legacy `## Gemini Added Memories`
   sections come in as entries too (never rendered again into its block);
4. replace the file only if it still holds what was read (`replace_if_unchanged`), else
   read again (a few times, then report).

What was rendered is saved before the file is written (as pending) and confirmed after,
so that a kill -9 between the two never makes the next run read memsync's own lines as
a person's edits: the block is read against whichever of the two renderings it is.

`remove_block` takes the block out and leaves the file as it was without it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.bridge_block import (
    FORMAT_LIMITS,
    BlockError,
    Limits,
    Rendered,
    Selection,
    Span,
    locate,
    render_block,
)
from memsync.core.bridge_edits import Changes, Line, change_records, diff_block, parse_item
from memsync.core.lines import classify
from memsync.core.prompt import PromptEntry
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.core.view import build_view
from memsync.errors import MemsyncError
from memsync.local.bridge_files import (
    BridgeRefused,
    Snapshot,
    may_create,
    read_bridged,
    replace_if_unchanged,
)
from memsync.local.bridge_records import append_records, legacy_gemini, live_entries
from memsync.local.fresh import now_us
from memsync.local.lock import file_lock, held
from memsync.local.memory import Memory
from memsync.local.reading import is_header, scan
from memsync.local.statedir import StateDir, StateDirLike
from memsync.local.storage import atomic_replace

__all__ = [
    "BLOCK_FORMATS",
    "Bridge",
    "BridgeResult",
    "one_sync_at_a_time",
    "remove_block",
    "sync_bridge",
]

BLOCK_FORMATS = ("agents-md", "claude-md", "gemini-md", "markdown")
"""The formats whose file holds one managed block."""

ATTEMPTS = 5
"""How many times a file that keeps changing under memsync is read again."""
LOCK_SECONDS = 30.0
"""How long a sync waits for another process's sync of the same bridge."""

_DEFAULT_KIND = {"agents-md": "preference", "claude-md": "preference"}


@dataclass(frozen=True, slots=True)
class Bridge:
    """A bridged file: its path, format and what of the view goes into it."""

    path: Path
    format: str
    selection: Selection = field(default_factory=Selection)


@dataclass
class BridgeResult:
    """What one sync of a bridge did: whether the file was written, how many records the
    block's edits appended, why it was refused (None: it was not), and what to report."""

    path: str
    written: bool = False
    appended: int = 0
    refused: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "written": self.written,
            "appended": self.appended,
            "refused": self.refused,
            "notes": self.notes,
        }


def sync_bridge(
    memory: str | os.PathLike[str],
    bridge: Bridge,
    *,
    machine: str,
    state_dir: StateDirLike | None = None,
    now: int | None = None,
) -> BridgeResult:
    """Sync `bridge` with memory file `memory` (the module docstring); `machine` names
    this machine in the `source` of the records its block's edits make.

    Raises:
        OSError: the file or the memory cannot be read or written (naming it).
    """
    if bridge.format not in BLOCK_FORMATS:
        raise ValueError(f"not a block format: {bridge.format!r}")
    state = StateDir.of(state_dir)
    result = BridgeResult(str(bridge.path))
    mem = Memory.open(memory)
    try:
        with one_sync_at_a_time(state, bridge.path):
            return _sync(mem, bridge, machine, state, now, result)
    except MemsyncError as exc:
        result.refused = str(exc)
        return result


def one_sync_at_a_time(state: StateDir, bridged: Path) -> AbstractContextManager[None]:
    """Hold the bridge's lock (`StateDir.bridge_lock`) for the `with` block.

    Raises:
        MemsyncError: another process held it for `LOCK_SECONDS`.
    """
    return held(
        state.bridge_lock(bridged),
        LOCK_SECONDS,
        lambda: MemsyncError(f"{bridged}: another memsync is syncing it; try again"),
    )


def _sync(
    mem: Memory,
    bridge: Bridge,
    machine: str,
    state: StateDir,
    now: int | None,
    result: BridgeResult,
) -> BridgeResult:
    """Read, ingest, render and replace until the file stays still meanwhile (at most
    `ATTEMPTS` times); a refusal ends it."""
    for _ in range(ATTEMPTS):
        try:
            if _attempt(mem, bridge, machine, state, now, result):
                return result
        except (BridgeRefused, BlockError) as exc:
            result.refused = str(exc) if isinstance(exc, BridgeRefused) else f"{bridge.path}: {exc}"
            return result
        result.notes.append("the file changed while memsync rendered: read again")
    result.refused = f"{bridge.path}: kept changing while memsync rendered; left as it is"
    return result


def _attempt(
    mem: Memory, bridge: Bridge, machine: str, state: StateDir, now: int | None, out: BridgeResult
) -> bool:
    """One read, ingest, render and replace; False when the file changed meanwhile."""
    snap = read_bridged(bridge.path)
    if snap.data is None and (why := may_create(bridge.path)) is not None:
        raise BridgeRefused(why)
    bom, text = _without_bom(_decode(snap))
    _not_a_memory_file(snap, text)
    span = locate(text)
    confirmed, pending = _load(state, snap.target)
    saved = [r for r in (confirmed, pending) if r is not None]
    if span is not None and saved:
        before = _closest(saved, span.inner)
        changes = diff_block(before, span.inner)
        if changes.reshaped is not None:
            out.notes.append(
                f"the block changed shape ({changes.reshaped}): no change taken from it, "
                "rendered again"
            )
        elif changes:
            out.appended += _ingest(mem, bridge, machine, changes, now, out)
    elif span is None and saved:
        out.notes.append("the block was gone (rewritten by an agent?): rendered again")
    elif span is not None:
        # No record of rendering it here (a state directory lost, a file a dotfiles tool
        # brought from another machine): only lines that say what no record ever said
        # are taken (as added), never an edit or a deletion, so nothing deleted elsewhere
        # comes back.
        adds = tuple(x for x in map(parse_item, span.inner) if x is not None)
        out.notes.append("no record of rendering this block here: only new lines were read")
        if adds:
            out.appended += _ingest(
                mem, bridge, machine, Changes(adds=adds), now, out, new_only=True
            )
    outside = text if span is None else text[: span.start] + text[span.stop :]
    shown: set[str] = set()
    if bridge.format == "gemini-md":
        added, shown = legacy_gemini(
            mem,
            bridge.path,
            outside,
            home=bridge.selection.home,
            machine=machine,
            now=now,
            notes=out.notes,
        )
        out.appended += added
    entries = [e for e in live_entries(mem, now) if e.id not in shown]
    rendered = _render(entries, bridge, bom + outside, _newline(text))
    if rendered.left_out:
        out.notes.append(f"{rendered.left_out} entries left out to fit the budget")
    if rendered.withheld:
        out.notes.append(f"{len(rendered.withheld)} entries withheld: they look like secrets")
    if bridge.format == "agents-md" and (bridge.path.parent / "AGENTS.override.md").exists():
        out.notes.append("AGENTS.override.md sits beside it: Codex reads that file instead")
    new = bom + _splice(text, span, rendered.text)
    if new == bom + text:
        _save(state, snap.target, rendered, None)
        return True
    _save(state, snap.target, confirmed, rendered)
    if not replace_if_unchanged(snap, new.encode("utf-8")):
        return False
    _save(state, snap.target, rendered, None)
    out.written = True
    return True


def _decode(snap: Snapshot) -> str:
    if snap.data is None:
        return ""
    try:
        return snap.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = snap.data.count(b"\n", 0, exc.start) + 1
        raise BridgeRefused(f"{snap.path}:{line}: not UTF-8; left as it is") from None


def _without_bom(text: str) -> tuple[str, str]:
    """A byte order mark at the start of `text` (rule 1), and the rest: the block goes
    after it, so that it stays the file's first bytes (before it, it would be a stray
    character at the start of the person's first line, breaking a heading there)."""
    return ("\ufeff", text[1:]) if text.startswith("\ufeff") else ("", text)


def _not_a_memory_file(snap: Snapshot, text: str) -> None:
    """Refuse a memory file (its first line a header or a record, rules 2 and 3): a block
    at its top would push its header down and add bad lines.

    Raises:
        BridgeRefused: it is one.
    """
    first = text.split("\n", 1)[0].rstrip("\r").encode("utf-8")
    if first and (is_header(first) or type(classify(first)) is Record):
        raise BridgeRefused(
            f"{snap.path}: a memory file (JSON Lines), not Markdown; bridge a Markdown file"
        )


_READER = {"agents-md": "Codex's budget", "claude-md": "what Claude Code loads"}


def _limits(bridge: Bridge, outside: str) -> Limits:
    """The format's limit on the whole file (`FORMAT_LIMITS`), less what the file holds
    besides the block: the block, markers included, keeps the file within it.

    Raises:
        BridgeRefused: the file's own text leaves no room.
    """
    limits = FORMAT_LIMITS[bridge.format]
    if limits.max_bytes is None:
        return limits
    room = limits.max_bytes - len(outside.encode("utf-8"))
    if room <= 0:
        raise BridgeRefused(
            f"{bridge.path}: its own text already fills {_READER.get(bridge.format, 'the limit')}"
            f" ({limits.max_bytes} bytes); no room for the block"
        )
    return Limits(room, limits.max_chars, limits.max_lines)


def _render(entries: list[PromptEntry], bridge: Bridge, outside: str, nl: str) -> Rendered:
    """The block within the format's limit on the whole file (`_limits`) as it is
    written: in "\r\n" line endings each of its lines takes a byte more than
    `render_block` counts, so the room is tightened by that excess until it fits (a
    Codex that stops reading at 32 KiB would cut the end marker and the person's text).

    Raises:
        BridgeRefused: the file's own text leaves no room. BlockError: not even the
            markers fit.
    """
    limits = _limits(bridge, outside)
    rendered = render_block(entries, bridge.selection, limits)
    while limits.max_bytes is not None and nl != "\n":
        text = rendered.text
        excess = len(text.encode("utf-8")) + text.count("\n") * (len(nl) - 1) - limits.max_bytes
        if excess <= 0:
            break
        limits = Limits(limits.max_bytes - excess, limits.max_chars, limits.max_lines)
        rendered = render_block(entries, bridge.selection, limits)
    return rendered


def _newline(text: str) -> str:
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _splice(text: str, span: Span | None, block: str) -> str:
    """`text` with `block` where its block was, or first at the top (after a frontmatter),
    in the file's line endings; the last line break kept as the file had it."""
    nl = _newline(text)
    block = block.replace("\n", nl)
    if span is not None:
        if not text[span.start : span.stop].endswith("\n"):
            block = block[: -len(nl)]
        return text[: span.start] + block + text[span.stop :]
    at = _after_frontmatter(text)
    return text[:at] + block + text[at:]


def _after_frontmatter(text: str) -> int:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return 0
    offset = len(lines[0])
    for line in lines[1:]:
        offset += len(line)
        if line.rstrip("\r\n") == "---":
            return offset
    return 0


def _ingest(
    mem: Memory,
    bridge: Bridge,
    machine: str,
    changes: Changes,
    now: int | None,
    out: BridgeResult,
    *,
    new_only: bool = False,
) -> int:
    """Append the records of `changes`; how many. `new_only`: the added lines whose text
    no record of the memory holds (alive or not) only."""
    at = now_us() if now is None else now
    with file_lock(mem.path, mem.lock_timeout):
        result = scan([mem.path])
        superseded = result.index.superseded
        live = build_view(result.index, at).live
        said = {(f["kind"], f.get("scope", "global"), f["text"]) for f in map(Record.fields, live)}
        adds = tuple(line for line in changes.adds if not _said(line, said))
        if new_only:
            ever = [*result.index.user.values(), *result.index.inferred.values()]
            held = {r.fields()["text"] for r in ever}
            adds = tuple(line for line in adds if line.text not in held)
        # A deletion must come after every version of what it deletes (rule 8), whatever
        # another machine's clock stamped them with: the hybrid clock, as `Memory` keeps.
        index = result.index
        touched = [i for item in changes.deletes for i in item.ids]
        touched += [i for item, _ in changes.edits for i in item.ids]
        for rid in touched:
            for rec in (index.user.get(rid), index.inferred.get(rid), index.tombs.get(rid)):
                if rec is not None:
                    at = max(at, rec.ts + 1)
        got = change_records(
            Changes(changes.edits, changes.deletes, adds),
            source=f"bridge:{bridge.format}@{machine}",
            created_at=format_ts(at),
            default_kind=_DEFAULT_KIND.get(bridge.format, "fact"),
            default_scope=bridge.selection.home,
            tags=("bridge", bridge.format),
            superseded=superseded.__contains__,
        )
        out.notes.extend(f"{bridge.path}: a line of the block {w}" for w in got.withheld)
        return append_records(mem, got.records, str(bridge.path))


def _said(line: Line, said: set[tuple[str, str, str]]) -> bool:
    """Whether an added line says what a live entry says already (nothing twice)."""
    return any(
        text == line.text and line.kind in (None, kind) and line.scope in (None, scope)
        for kind, scope, text in said
    )


# --- What was rendered --------------------------------------------------------------------


def _load(state: StateDir, target: Path) -> tuple[Rendered | None, Rendered | None]:
    """The renderings saved for `target`: the confirmed one and a pending one (None
    where none, or nothing readable, was saved)."""
    try:
        doc = json.loads(state.bridge_rendered(target).read_bytes())
        pair = [
            None if doc.get(k) is None else Rendered.from_json(doc[k].encode("utf-8"))
            for k in ("confirmed", "pending")
        ]
    except (FileNotFoundError, ValueError, TypeError, AttributeError):
        return None, None
    return pair[0], pair[1]


def _save(
    state: StateDir, target: Path, confirmed: Rendered | None, pending: Rendered | None
) -> None:
    doc = {
        "confirmed": None if confirmed is None else confirmed.to_json().decode("utf-8"),
        "pending": None if pending is None else pending.to_json().decode("utf-8"),
    }
    path = state.prepared(state.bridge_rendered(target))
    atomic_replace(path, json.dumps(doc, ensure_ascii=False).encode("utf-8"))


def _closest(saved: list[Rendered], inner: tuple[str, ...]) -> Rendered:
    """The saved rendering the block's lines keep most of (the confirmed one on a tie)."""
    lines = Counter(x.rstrip() for x in inner)

    def kept(r: Rendered) -> int:
        return sum((Counter(i.line for i in r.items) & lines).values())

    return max(saved, key=kept)


def remove_block(path: str | os.PathLike[str], *, state_dir: StateDirLike | None = None) -> bool:
    """Take memsync's block out of the file at `path`, leaving every other byte as it
    was, and forget what was rendered there; False when it holds no block.

    Raises:
        BridgeRefused: the file cannot be written (the reason named), or changed while
            memsync wrote it five times running.
        BlockError: its markers are damaged (nothing is changed).
    """
    state = StateDir.of(state_dir)
    with one_sync_at_a_time(state, Path(path).expanduser()):
        for _ in range(ATTEMPTS):
            snap = read_bridged(Path(path).expanduser())
            if snap.data is None:
                return False
            bom, text = _without_bom(_decode(snap))
            span = locate(text)
            if span is None:
                return False
            rest = (bom + text[: span.start] + text[span.stop :]).encode("utf-8")
            if replace_if_unchanged(snap, rest):
                state.bridge_rendered(snap.target).unlink(missing_ok=True)
                return True
    raise BridgeRefused(f"{path}: kept changing while memsync wrote it; left as it is")
