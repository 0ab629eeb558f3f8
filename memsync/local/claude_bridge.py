"""The `claude-auto-memory` bridge (issue 22, items 2 and 3): a memory kept in step with
Claude Code's auto-memory folder of a project.

Finding the folder: Claude Code keeps a project's memory in
`~/.claude/projects/<project>/memory/` (under `$CLAUDE_CONFIG_DIR` when set), `<project>`
derived from the project's git root by a lossy encoding (and a build-dependent hash past
200 characters). So memsync never computes it: `find_memory_folder` reads the session
transcripts (`*.jsonl`) of each project folder for the `cwd` Claude ran in, and keeps the
folder whose `cwd` has the same git root (the main worktree's, as Claude keys it). Only
where no transcript says anything is the encoded name tried, and only if it exists.

In: each memory file Claude wrote (not memsync's `memsync_*.md`) becomes an entry, with
the id `memsync import --from claude-auto-memory` gives it (the same memory gives the same
id on every machine) and `source` "bridge:claude-auto-memory@<machine>"; one already in
the memory, forgotten or superseded there is not appended again. A file Claude rewrote
supersedes what it said before; a file Claude deleted is a tombstone, unless every one
went at once (a moved or wiped folder: no deletion, reported). A file of memsync's that
Claude edited supersedes the entry it showed. A file of Claude's whose entry was deleted
or superseded (here or on another machine) is deleted, if it still holds what was read,
with its pointer line in `MEMORY.md`.

Out: the entries of the selection that Claude's own files do not already hold are
written as files of Claude's shape (`core.claude_files`), as many as `MEMORY.md`'s limit
(200 lines, 25 KB, with Claude's own lines) leaves room for, each pointed to from
memsync's block in `MEMORY.md`; memsync's files no longer selected are deleted. Every
file is replaced only if it still holds what was read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.bridge_block import BlockError, Limits, locate
from memsync.core.bridge_edits import unescape
from memsync.core.claude_files import OURS, file_name, index_block, memory_file
from memsync.core.secrets import find_secrets
from memsync.core.timestamps import format_ts
from memsync.core.vendor_memory import claude_memory, entry_id
from memsync.errors import MemsyncError
from memsync.local.bridge_files import BridgeRefused, read_bridged, replace_if_unchanged
from memsync.local.bridge_records import append_records, live_entries
from memsync.local.bridges import (
    Bridge,
    BridgeResult,
    one_sync_at_a_time,
    remove_block,
)
from memsync.local.fresh import now_us
from memsync.local.lock import file_lock
from memsync.local.memory import Memory
from memsync.local.reading import scan
from memsync.local.statedir import StateDir, StateDirLike
from memsync.local.storage import atomic_replace, utf8_text

__all__ = ["find_memory_folder", "git_root", "remove_claude_bridge", "sync_claude_bridge"]

INDEX_LIMIT = Limits(max_bytes=25_000, max_lines=200)
"""What Claude Code loads of `MEMORY.md`."""
MASS_DELETION = 3
"""Every one of at least this many of Claude's files gone at once is no deletion."""
_TRANSCRIPT_BYTES = 64 * 1024


def git_root(path: Path) -> Path:
    """The root of the main worktree of the repository holding `path` (a linked
    worktree's `.git` file is followed to its common folder), or `path` itself outside
    a repository: how Claude Code keys a project's memory."""
    path = Path(os.path.realpath(path))
    for d in (path, *path.parents):
        dot = d / ".git"
        if dot.is_dir():
            return d
        if dot.is_file():
            try:
                text = dot.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return d
            m = re.match(r"gitdir:\s*(.+)", text.strip())
            if m is None:
                return d
            gitdir = (d / m[1].strip()).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                main = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
                return main.parent
            return d
    return path


def _claude_dir() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def _cwd_of(folder: Path) -> Path | None:
    """The `cwd` the newest session transcript of a project folder names, if any."""
    transcripts = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for t in transcripts[:2]:
        try:
            with open(t, "rb") as f:
                head = f.read(_TRANSCRIPT_BYTES)
        except OSError:
            continue
        for raw in head.split(b"\n"):
            if b'"cwd"' not in raw:
                continue
            try:
                cwd = json.loads(raw).get("cwd")
            except (ValueError, AttributeError):
                continue
            if isinstance(cwd, str) and cwd:
                return Path(cwd)
    return None


def find_memory_folder(project: Path, claude_dir: Path | None = None) -> Path:
    """The auto-memory folder of `project` (the module docstring).

    Raises:
        BridgeRefused: no project folder of Claude Code is found for it.
    """
    root = git_root(project)
    projects = (claude_dir or _claude_dir()) / "projects"
    encoded = re.sub(r"[^A-Za-z0-9]", "-", str(root))
    # The folder the encoding names, when its sessions ran in this project: found without
    # reading every project's transcripts (a person may have hundreds).
    guess = projects / encoded
    if guess.is_dir() and (cwd := _cwd_of(guess)) is not None and git_root(cwd) == root:
        return guess / "memory"
    found = []
    unknown = []
    for folder in sorted(p for p in projects.glob("*") if p.is_dir()) if projects.is_dir() else []:
        cwd = _cwd_of(folder)
        if cwd is None:
            unknown.append(folder)
        elif git_root(cwd) == root:
            found.append(folder)
    if not found:
        found = [f for f in unknown if f.name == encoded]
    if not found:
        raise BridgeRefused(
            f"{project}: no Claude Code project folder for {root} under {projects} "
            "(start Claude Code in the project once)"
        )
    # Several (a renamed build's hash, an old encoding): the one the encoding names, else
    # the newest.
    best = next((f for f in found if f.name == encoded), None) or max(
        found, key=lambda f: f.stat().st_mtime
    )
    return best / "memory"


@dataclass
class _State:
    """What this machine knows of the folder: memsync's files (name: id and digest of
    what was written) and Claude's (name: id of the entry it became, digest of what was
    read, and "alive": "1" once that entry was seen alive in the view)."""

    ours: dict[str, dict[str, str]] = field(default_factory=dict)
    theirs: dict[str, dict[str, str]] = field(default_factory=dict)
    unreadable: set[str] = field(default_factory=set)
    """This sync's files that are not UTF-8 (not saved): read by nobody, so neither taken
    in, nor written over, nor deleted; the others are synced all the same."""

    @classmethod
    def load(cls, path: Path) -> _State:
        try:
            doc = json.loads(path.read_bytes())
            theirs = {  # an id alone: what the first version kept
                k: v if isinstance(v, dict) else {"id": v, "sha": "", "alive": ""}
                for k, v in doc["theirs"].items()
            }
            return cls(dict(doc["ours"]), theirs)
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return cls()

    def claudes(self) -> set[str]:
        """The ids of the entries Claude's own files hold."""
        return {t["id"] for t in self.theirs.values()}

    def save(self, state: StateDir, path: Path) -> None:
        doc = {"ours": self.ours, "theirs": self.theirs}
        atomic_replace(state.prepared(path), json.dumps(doc, sort_keys=True).encode("utf-8"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sync_claude_bridge(
    memory: str | os.PathLike[str],
    bridge: Bridge,
    *,
    machine: str,
    state_dir: StateDirLike | None = None,
    now: int | None = None,
    claude_dir: Path | None = None,
) -> BridgeResult:
    """Sync the auto-memory folder of the project `bridge.path` with memory file `memory`
    (the module docstring)."""
    result = BridgeResult(str(bridge.path))
    try:
        folder = find_memory_folder(bridge.path, claude_dir)
    except BridgeRefused as exc:
        result.refused = str(exc)
        return result
    folder.mkdir(mode=0o700, exist_ok=True)
    state = StateDir.of(state_dir)
    state_path = state.bridge_rendered(folder)
    mem = Memory.open(memory)
    try:
        with one_sync_at_a_time(state, folder):
            known = _State.load(state_path)
            try:
                result.appended = _ingest(mem, bridge, folder, known, machine, now, result)
                _render(mem, bridge, folder, known, now, result)
            finally:
                known.save(state, state_path)
    except (BridgeRefused, BlockError, MemsyncError) as exc:
        result.refused = f"{folder}: {exc}"
    return result


def _ingest(
    mem: Memory,
    bridge: Bridge,
    folder: Path,
    known: _State,
    machine: str,
    now: int | None,
    out: BridgeResult,
) -> int:
    """Append the entries and tombstones of what Claude wrote, edited and deleted."""
    home = bridge.selection.home
    records: list[dict[str, Any]] = []
    at = now_us() if now is None else now
    with file_lock(mem.path, mem.lock_timeout):
        index = scan([mem.path]).index
        seen = set(index.user) | set(index.inferred) | set(index.tombs) | set(index.superseded)

        def entry(kind: str, text: str, tags: tuple[str, ...], supersedes: str | None) -> str:
            rid = entry_id("claude-auto-memory", kind, home, *tags, text)
            if rid == supersedes:
                return rid  # the same memory (its file was only touched)
            if supersedes is not None or rid in index.superseded:
                rid = entry_id("claude-auto-memory", kind, home, *tags, text, supersedes or "")
            if rid not in seen:
                obj = {
                    "id": rid,
                    "kind": kind,
                    "text": text,
                    "scope": home,
                    "tags": list(tags),
                    "source": f"bridge:claude-auto-memory@{machine}",
                    "confidence": 1.0,
                    "created_at": format_ts(_after(index, supersedes, at)),
                }
                if supersedes is not None:
                    obj["supersedes"] = supersedes
                    records.append(
                        {"id": supersedes, "deleted": True, "created_at": obj["created_at"]}
                    )
                records.append(obj)
                seen.add(rid)
            return rid

        present = sorted(p for p in folder.glob("*.md") if p.name != "MEMORY.md" and p.is_file())
        names = {p.name for p in present}
        for p in present:
            try:
                text = _read(p)
            except MemsyncError as exc:  # one file memsync cannot read: not the others
                known.unreadable.add(p.name)
                out.notes.append(f"{exc}: left as it is")
                continue
            if OURS.match(p.name):
                mine = known.ours.get(p.name)
                if mine is None or _digest(text) == mine["sha"]:
                    continue  # memsync's file as written (or another machine's: not ours)
                found = claude_memory(p.name, unescape(text))
                if found and not _secret(found[0].text, p, out):
                    known.ours[p.name]["sha"] = _digest(text)
                    entry(found[0].kind, found[0].text, found[0].tags, mine["id"])
                continue
            before = known.theirs.get(p.name)
            if before is not None and before["sha"] == _digest(text):
                continue  # as it was read last time
            found = claude_memory(p.name, text)
            if not found or _secret(found[0].text, p, out):
                continue
            # Claude rewrote a file it had written: what it says now supersedes.
            was = None if before is None else before["id"]
            rid = entry(found[0].kind, found[0].text, found[0].tags, was)
            known.theirs[p.name] = {"id": rid, "sha": _digest(text), "alive": ""}
        gone = [n for n in known.theirs if n not in names]
        if gone and len(gone) == len(known.theirs) >= MASS_DELETION:
            out.notes.append(
                f"all {len(gone)} of Claude's memory files are gone at once (a moved or "
                "wiped folder?): no deletion taken from it"
            )
        else:
            for n in gone:
                rid = known.theirs[n]["id"]
                records.append(
                    {"id": rid, "deleted": True, "created_at": format_ts(_after(index, rid, at))}
                )
        for n in gone:
            del known.theirs[n]
        return append_records(mem, records, str(folder))


def _after(index: Any, rid: str | None, at: int) -> int:
    """`at`, or just after every version of `rid` (a deletion must come after what it
    deletes, whatever another machine's clock said: rule 8)."""
    if rid is None:
        return at
    for rec in (index.user.get(rid), index.inferred.get(rid), index.tombs.get(rid)):
        if rec is not None:
            at = max(at, rec.ts + 1)
    return at


def _secret(text: str, path: Path, out: BridgeResult) -> bool:
    found = find_secrets(text)
    if found:
        out.notes.append(f"{path}: looks like a secret ({', '.join(found)}): not recorded")
    return bool(found)


def _read(path: Path) -> str:
    return utf8_text(path.read_bytes(), path)


def _render(
    mem: Memory, bridge: Bridge, folder: Path, known: _State, now: int | None, out: BridgeResult
) -> None:
    """Write memsync's files and its block of `MEMORY.md`; delete its files no longer
    selected."""
    index = folder / "MEMORY.md"
    snap = read_bridged(index)
    # Strictly, before anything is deleted: a byte that is not UTF-8 would be written
    # back as U+FFFD, and the person's or Claude's byte lost.
    original = "" if snap.data is None else utf8_text(snap.data, index)
    live = live_entries(mem, now)
    dropped = _forget_claudes(folder, known, {e.id for e in live}, out)
    claudes = known.claudes()
    entries = [e for e in live if e.id not in claudes]
    span = locate(original)
    if span is None:
        text = _without_pointers(original, dropped)
    else:
        before, after = original[: span.start], original[span.stop :]
        text = _without_pointers(before, dropped) + original[span.start : span.stop]
        text += _without_pointers(after, dropped)
    span = locate(text)
    outside = text if span is None else text[: span.start] + text[span.stop :]
    room = Limits(
        max_bytes=INDEX_LIMIT.max_bytes - len(outside.encode("utf-8")),  # type: ignore[operator]
        max_lines=INDEX_LIMIT.max_lines - len(outside.splitlines()),  # type: ignore[operator]
    )
    block = index_block(entries, bridge.selection, room)
    if block.left_out:
        out.notes.append(f"{block.left_out} entries left out to fit MEMORY.md's limit")
    if block.withheld:
        out.notes.append(f"{len(block.withheld)} entries withheld: they look like secrets")
    wanted = {file_name(e.id): (e.id, memory_file(e)) for e in block.entries}
    for name, (rid, body) in wanted.items():
        if name in known.unreadable:
            continue  # an edit memsync cannot read is not written over
        path = folder / name
        current = read_bridged(path)
        data = body.encode("utf-8")
        if current.data != data and replace_if_unchanged(current, data):
            out.written = True
        known.ours[name] = {"id": rid, "sha": _digest(body)}
    for name in [n for n in known.ours if n not in wanted and n not in known.unreadable]:
        path = folder / name
        if path.is_file() and _digest(_read(path)) == known.ours[name]["sha"]:
            path.unlink()
            out.written = True
        del known.ours[name]
    if span is None:
        new = text + ("" if not text or text.endswith("\n") else "\n") + block.text
    else:
        new = text[: span.start] + block.text + text[span.stop :]
    if new != original and replace_if_unchanged(snap, new.encode("utf-8")):
        out.written = True
    elif new != original:
        out.notes.append(
            f"{index} changed while memsync wrote it: its block waits for the next sync"
        )


def _forget_claudes(folder: Path, known: _State, alive: set[str], out: BridgeResult) -> set[str]:
    """Delete Claude's files whose entry was alive and no longer is (deleted or
    superseded, here or on another machine: a deletion reaches Claude too), if they
    still hold what was read; the names deleted."""
    dropped = set()
    for name, t in list(known.theirs.items()):
        if t["id"] in alive:
            t["alive"] = "1"
            continue
        path = folder / name
        if name in known.unreadable:
            continue
        if t.get("alive") and path.is_file() and _digest(_read(path)) == t["sha"]:
            path.unlink()
            del known.theirs[name]
            dropped.add(name)
            out.written = True
            out.notes.append(f"{path}: its memory was forgotten or replaced: deleted")
    return dropped


def _without_pointers(text: str, names: set[str]) -> str:
    """Text of `MEMORY.md` outside memsync's block without the pointer lines to the files
    `names` (a pointer to a deleted file would dangle) nor to memsync's own files (Claude,
    rewriting its index, may copy memsync's pointers out of the block: they would show a
    memory twice). Claude's own format: one line a memory."""
    files = [*map(re.escape, sorted(names)), r"memsync_[A-Za-z0-9_-]{1,64}\.md"]
    pointer = re.compile(r"^\s*[-*+]\s+\[[^\]]*\]\((" + "|".join(files) + r")(#[^)]*)?\).*$")
    return "".join(line for line in _LINE.findall(text) if not pointer.match(line.rstrip("\r\n")))


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
"""A line as Markdown reads it, with its break: "\n", "\r\n" or "\r" (not U+2028, NEL
or a form feed, where `str.splitlines` also breaks: a pointer after one is no line)."""


def remove_claude_bridge(
    project: Path, *, state_dir: StateDirLike | None = None, claude_dir: Path | None = None
) -> int:
    """Take memsync's files and its block of `MEMORY.md` out of `project`'s auto-memory
    folder (Claude's files and lines stay as they are); how many files went. A file of
    memsync's that Claude edited since stays: it is Claude's now.

    Raises:
        BridgeRefused: the folder is not found, or a file cannot be written.
        BlockError: `MEMORY.md`'s markers are damaged (its block is left).
    """
    folder = find_memory_folder(project, claude_dir)
    state = StateDir.of(state_dir)
    state_path = state.bridge_rendered(folder)
    known = _State.load(state_path)
    gone = 0
    for name, mine in known.ours.items():
        path = folder / name
        if path.is_file() and _digest(_read(path)) == mine["sha"]:
            path.unlink()
            gone += 1
    remove_block(folder / "MEMORY.md", state_dir=state)
    state_path.unlink(missing_ok=True)
    return gone
