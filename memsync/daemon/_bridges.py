"""The daemon's bridges (issue 22, item 5): bridged files are watched like memory files.

A memory's bridges are synced (`memsync.config.bridges.sync_configured`) when its memory
file changes (an agent appended, or a pass merged another machine's records in), when a
bridged file changes (a person or an agent edited it), and at every reconcile pass. So a
memory an agent writes on one machine reaches the bridged files of the others through
any hub. The syncs of all bridges run in one worker thread of their own, one at a time;
memsync's own writes wake the watcher once more and find nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memsync.config import Config
from memsync.config.bridges import sync_configured, watched_files
from memsync.daemon._watch import same_path
from memsync.local.logs import get_logger

__all__ = ["BRIDGES", "Bridges"]

logger = get_logger(__name__)

BRIDGES = "\0bridges"
"""The name of the bridges' worker (no remote can have it)."""


class Bridges:
    """The bridges of a config, as the daemon runs them."""

    def __init__(self, config: Config, machine: str) -> None:
        self.config = config
        self.machine = machine
        self._files = {i: watched_files(b) for i, b in enumerate(config.bridge)}
        self._reported: dict[str, str] = {}
        self._names = {f.name for files in self._files.values() for f in files}

    def folders(self) -> set[Path]:
        """The folders to watch: each bridged file's (and its link target's), and each
        auto-memory folder."""
        out = set()
        for i, b in enumerate(self.config.bridge):
            for f in self._files[i]:
                folder = f if b.format == "claude-auto-memory" else f.parent
                if folder.is_dir():
                    out.add(folder)
        return out

    def memories_of(self, changed: Iterable[Path]) -> set[str]:
        """The memories whose bridges a change of `changed` calls for a sync of."""
        # Temp files start with a dot; so do bridged files such as `.cursorrules`.
        changed = [p for p in changed if not p.name.startswith(".") or p.name in self._names]
        out = set()
        for mem in self.config.memory:
            if any(same_path(p, mem.path) for p in changed) and self._any(mem.name):
                out.add(mem.name)
        for i, b in enumerate(self.config.bridge):
            for f in self._files[i]:
                if b.format == "claude-auto-memory":
                    hit = any(same_path(p.parent, f) for p in changed)
                else:
                    hit = any(same_path(p, f) for p in changed)
                if hit:
                    out.add(b.memory)
        return out

    def _any(self, memory: str) -> bool:
        return any(b.memory == memory for b in self.config.bridge)

    def memories(self) -> list[str]:
        """Every memory that has a bridge."""
        return sorted({b.memory for b in self.config.bridge})

    def wanted(self, path: str) -> bool:
        """Whether the watcher reports a change of the file at `path`: Markdown (a memory
        file of Claude's) or of a bridged file's name (`.cursorrules` has no suffix)."""
        return path.endswith((".md", ".mdc")) or Path(path).name in self._names

    def sync(self, memory: str) -> dict[str, tuple[str | None, list[str]]]:
        """Sync every bridge of `memory` once, logging what each did (a refusal once
        until its reason changes). By bridged path, why each was refused (None: it was
        not) and its notes: for the daemon's status."""
        mem = self.config.memory_named(memory)
        if mem is None:
            return {}
        done: dict[str, tuple[str | None, list[str]]] = {}
        for b in self.config.bridge:
            if b.memory != memory:
                continue
            key = str(b.path)
            try:
                result = sync_configured(
                    b, mem.path, machine=self.machine, state_dir=self.config.state_dir
                )
            except OSError as exc:
                self._report(key, f"bridge {b.path}: {exc}")
                done[key] = (str(exc), [])
                continue
            done[key] = (result.refused, list(result.notes))
            if result.refused is not None:
                self._report(key, f"bridge {b.path}: refused: {result.refused}")
                continue
            self._reported.pop(key, None)
            if result.written or result.appended:
                logger.info(
                    "bridge %s: %s, %d record(s) from its edits",
                    b.path,
                    "written" if result.written else "up to date",
                    result.appended,
                )
            for note in result.notes:
                logger.info("bridge %s: %s", b.path, note)
        return done

    def _report(self, key: str, message: str) -> None:
        if self._reported.get(key) != message:
            self._reported[key] = message
            logger.warning("%s", message)
