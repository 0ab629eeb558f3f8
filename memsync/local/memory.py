"""`Memory`: one memory file, the library's main entry point (core + storage + lock).

Reading builds the view of SEMANTICS rules 1 to 12 from the file's records; writing appends
whole lines under the file's lock (rule 13). Timestamps memsync writes follow a hybrid
clock so that a new version or a tombstone written on a machine whose clock is behind still
wins (see `Memory._stamp`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from memsync.core.clock import next_stamp
from memsync.core.compaction_limits import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_QUIET_SECONDS,
)
from memsync.core.lines import MAX_ID_CHARS, Invalid, classify, split_complete, valid_id
from memsync.core.records import Record
from memsync.core.timestamps import format_ts, from_datetime
from memsync.errors import InvalidRecord, SecretRefused, UnknownId, UsageError, shown
from memsync.local.asides import asides_of
from memsync.local.foldcheck import carry_append
from memsync.local.fresh import header_line, new_id, now_us
from memsync.local.idscan import Known, Newest, naming, stored_newest
from memsync.local.lock import DEFAULT_TIMEOUT, file_lock
from memsync.local.netfs import warn_if_network_fs
from memsync.local.storage import (
    append_bytes,
    open_for_reading,
    private_dirs,
    read_chunks,
    read_chunks_fd,
    read_from,
    read_tail,
    write_all,
)

# The view (core.view, local.reading, local.located) and pydantic are imported only by the
# methods that read: appending, what `memsync add` does, starts without them (issue 20).
if TYPE_CHECKING:
    from memsync.local.acknowledgements import Acknowledgements
    from memsync.local.compaction import CompactionResult
    from memsync.local.reading import CheckReport, MemoryView
    from memsync.local.statedir import StateDirLike
    from memsync.local.viewstore import ViewStore
    from memsync.models import Entry, Tombstone

__all__ = ["Memory"]

_TAIL_FOR_CLOCK = 16 * 1024
"""How much of the end of a file the hybrid clock reads: memsync's own last write is there."""


class Memory:
    """One memory file: read its view, append to it, check it.

    Example:
        >>> mem = Memory.open("~/.local/share/agent-memory/me.jsonl")
        >>> entry = mem.add("preference", "The person prefers short answers.", source="user")
        >>> print(mem.to_prompt(scope="github.com"))

    Writes are appends of whole lines under the file's lock; nothing is ever edited in place.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = DEFAULT_TIMEOUT,
        refused: Iterable[str] = (),
        state_dir: StateDirLike | None = None,
    ):
        self.path = Path(path).expanduser()
        self.lock_timeout = lock_timeout
        self.refused = tuple(refused)
        """Strings never written by `add` (this machine's hub keys in every printed form:
        `memsync.config.wiring.own_key_forms`; issue 24, item 5)."""
        self.state_dir = state_dir
        """Where the file's persistent view lives (issue 20), or None: `to_prompt` then
        folds the whole file (its own process's cache aside)."""

    def __repr__(self) -> str:
        return f"Memory({str(self.path)!r})"

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        now: int | None = None,
        refused: Iterable[str] = (),
        state_dir: StateDirLike | None = None,
    ) -> Memory:
        """Open a memory file; create it (mode 0600, with a header) when missing and `create`
        (through a symlink to a missing file: where the link points).

        Raises:
            FileNotFoundError: it does not exist and `create` is False.
        """
        mem = cls(path, refused=refused, state_dir=state_dir)
        if not mem.path.exists():
            if not create:
                raise FileNotFoundError(f"{mem.path}: no such memory file")
            # A dangling symlink (a dotfiles link made before its file) is followed, as
            # merge, compaction and the lock follow links: the file is made where it points.
            # O_EXCL alone would refuse the link itself with "file exists".
            target = Path(os.path.realpath(mem.path))
            private_dirs(target.parent)
            with file_lock(mem.path, mem.lock_timeout):
                if not mem.path.exists():
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    try:
                        write_all(fd, header_line(now_us() if now is None else now))
                    except OSError as exc:  # a full disk: no empty file left, and say which
                        os.unlink(target)
                        raise OSError(exc.errno, exc.strerror, str(mem.path)) from exc
                    finally:
                        os.close(fd)
        warn_if_network_fs(mem.path)
        _recover(mem.path)  # lines a killed compaction left aside (rule 16)
        return mem

    # Reading

    def view(self, now: int | datetime | None = None) -> MemoryView:
        """The view at `now` (default: the local clock): live current versions (rule 12).
        With a `state_dir`, from the file's persistent view there (issue 20): only the
        lines the view holds and what was appended since are read. The same view."""
        store = self._store()
        if store is not None:
            from memsync.local.storedreads import stored_view

            return stored_view(self.path, store, _as_us(now))
        from memsync.local.reading import view_of

        return view_of([self.path], _as_us(now))

    def to_prompt(
        self,
        scope: str | None = None,
        *,
        max_chars: int | None = None,
        now: int | datetime | None = None,
    ) -> str:
        """The memory block for a task in `scope` (see `memsync.core.prompt.render_prompt`).

        At the local clock (`now` None) it comes from this process's cache of the file
        (`memsync.local.livecache.LiveCache`): rendered again only when the file changed or
        an entry expired, so repeated calls on an unchanged file cost microseconds.

        With a `state_dir`, both start from the file's persistent view there (issue 20):
        the process's cache on its first read, and a block at a given `now` every time,
        reading the lines the block holds and what was appended since the view was stored
        instead of every line. The same block either way.
        """
        store = self._store()
        if now is None:
            from memsync.local.livecache import live_cache  # sqlite3: not on `add`'s path

            return live_cache(self.path, store).prompt(scope, max_chars)
        if store is not None:
            from memsync.local.storedreads import stored_prompt

            return stored_prompt(self.path, store, scope, max_chars, now=_as_us(now))
        from memsync.local.reading import prompt_of

        return prompt_of(self.view(now).records, scope, max_chars)

    def _store(self) -> ViewStore | None:
        """The persistent views in `state_dir`, or None without one."""
        if self.state_dir is None:
            return None
        from memsync.local.statedir import StateDir  # not on `add`'s path (start-up)
        from memsync.local.viewstore import ViewStore

        return ViewStore(StateDir.of(self.state_dir))

    def check(self, now: int | datetime | None = None) -> CheckReport:
        """Bad lines, twins, credential-shaped text, records dated more than 5 min ahead."""
        from memsync.local.located import check_files

        return check_files([self.path], _as_us(now))

    def read_from(self, offset: int = 0) -> tuple[list[bytes], int]:
        """The complete lines from byte `offset` and the offset to read from next."""
        return read_from(self.path, offset)

    # Writing

    def add(
        self,
        kind: str,
        text: str,
        *,
        scope: str = "global",
        tags: Iterable[str] = (),
        source: str | None = None,
        confidence: float = 1.0,
        expires_at: datetime | str | None = None,
        supersedes: str | None = None,
        now: int | datetime | None = None,
    ) -> Entry:
        """Append a new entry with a new id and return it (a pydantic `Entry`; see
        `add_record` for the same without pydantic).

        Raises:
            SecretRefused: the text looks like a credential (the spec: never store secrets).
            InvalidRecord: a field breaks rule 3 (an unknown kind, a confidence out of [0, 1]).
        """
        from memsync.models import Entry, to_model

        model = to_model(
            self.add_record(
                kind,
                text,
                scope=scope,
                tags=tags,
                source=source,
                confidence=confidence,
                expires_at=expires_at,
                supersedes=supersedes,
                now=now,
            )
        )
        assert isinstance(model, Entry)
        return model

    def add_record(
        self,
        kind: str,
        text: str,
        *,
        scope: str = "global",
        tags: Iterable[str] = (),
        source: str | None = None,
        confidence: float = 1.0,
        expires_at: datetime | str | None = None,
        supersedes: str | None = None,
        now: int | datetime | None = None,
    ) -> Record:
        """`add`, returning the appended line as a `Record` (its raw bytes and the fields
        the rules use) instead of a pydantic model: what the command line and the MCP
        server use, so that they start without importing pydantic."""
        blob = "\n".join([text, scope, source or "", *tags])
        if any(form in blob for form in self.refused):
            raise SecretRefused(
                "refusing to store memsync's own hub key; memory files are shared and a "
                "hub key reads every encrypted hub (rotate it with `memsync key rotate` if "
                "it was pasted anywhere)"
            )
        from memsync.core.secrets import find_secrets  # (start-up: `forget` has no text)

        found = find_secrets(blob)
        if found:
            raise SecretRefused(
                f"refusing to store what looks like a secret ({', '.join(found)}); "
                "memory files are shared and never hold credentials"
            )
        if supersedes is not None and not valid_id(supersedes):
            # What it names must be able to exist: an id of rule 3's shape (issue 13, 21).
            raise InvalidRecord(
                f"invalid record: 'supersedes' {shown(supersedes)} is not an id (1 to "
                f"{MAX_ID_CHARS} characters, no control characters)"
            )
        obj: dict[str, Any] = {
            "id": new_id(),
            "kind": kind,
            "text": text,
            "scope": scope,
            "tags": list(tags),
            "source": source,
            "confidence": confidence,
            "expires_at": _as_text_ts(expires_at),
            "supersedes": supersedes,
        }
        return self._append(obj, _as_us(now), fresh_id=True)

    def supersede(
        self,
        old_id: str,
        text: str,
        *,
        kind: str | None = None,
        now: int | datetime | None = None,
        **fields: Any,
    ) -> Entry:
        """Append an entry that replaces `old_id` for good (rule 10); `kind` defaults to the
        old entry's kind.

        Raises:
            UnknownId: no `kind` given and `old_id` is not a live entry here.
            UsageError: `old_id`'s current version is the person's (`source: "user"`) and
                the new entry is not: rule 10 would ignore its `supersedes`, so the write
                would do nothing (issue 24, item 9).
        """
        return self.supersede_version(
            self._current(old_id), old_id, text, kind=kind, now=now, **fields
        )

    def supersede_version(
        self,
        old: Record | None,
        old_id: str,
        text: str,
        *,
        kind: str | None = None,
        now: int | datetime | None = None,
        **fields: Any,
    ) -> Entry:
        """`supersede` given `old`, the current version of `old_id` (`Index.current`, rules
        8 and 9) with its line, from the caller's view (a server's, issue 20): no scan."""
        self._refuse_void_supersession(old, old_id, fields.get("source"))
        if kind is None:
            if old is None or old.deleted:
                raise UnknownId(str(self.path), old_id, live=True)
            kind = str(old.fields()["kind"])
        return self.add(kind, text, supersedes=old_id, now=now, **fields)

    def check_supersession(self, old_id: str, source: str | None) -> None:
        """Raise UsageError when an entry of `source` superseding `old_id` would replace
        nothing (rule 10: `old_id`'s current version is the person's, the new entry is
        not): `memsync add --supersedes` asks before it writes, as `supersede` does. One
        scan of the lines that name `old_id`."""
        if source != "user" and self.path.exists():
            self._refuse_void_supersession(self._current(old_id), old_id, source)

    def _refuse_void_supersession(self, old: Record | None, old_id: str, source: Any) -> None:
        """Raise UsageError when `old` (the current version of `old_id`) is the person's
        and the superseding entry is not: rule 10 would ignore its `supersedes`, so the
        write would replace nothing (issue 24, item 9)."""
        if old is not None and not old.deleted and old.user and source != "user":
            raise UsageError(
                f"{self.path}: entry {shown(old_id)} is what the person said (source "
                '"user"), and an inferred entry cannot supersede it (SEMANTICS rule 10); '
                'give source "user" if the person said the correction'
            )

    def forget(self, rid: str, *, now: int | datetime | None = None) -> Tombstone:
        """Append a tombstone for `rid` (rule 8); later than every record of `rid` here.

        Raises:
            UnknownId: the file holds no record with that id.
        """
        from memsync.models import Tombstone, to_model

        model = to_model(self.forget_record(rid, now=now))
        assert isinstance(model, Tombstone)
        return model

    def forget_record(
        self, rid: str, *, now: int | datetime | None = None, known: Known | None = None
    ) -> Record:
        """`forget`, returning the tombstone as a `Record` (no pydantic). `known`: what the
        caller's view of the file holds of `rid` (a server's, issue 20; `Known`): then only
        the bytes after it are scanned for `rid`."""
        seen = self._newest_of(rid, None if known is None else Newest(*known))
        if seen.newest is None:
            raise UnknownId(str(self.path), rid)
        # The stamp's scan, under the lock, reads only what was appended since this one
        # (issue 20: one read of the file per `forget`, not two).
        return self._append({"id": rid, "deleted": True}, _as_us(now), seen=seen)

    def compact(
        self,
        *,
        now: int | datetime | None = None,
        horizon_days: float = DEFAULT_HORIZON_DAYS,
        quiet_seconds: float = DEFAULT_QUIET_SECONDS,
        dry_run: bool = False,
        acknowledged: Acknowledgements = None,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
    ) -> CompactionResult:
        """Rewrite the file with only what its view needs (rules 15 and 16); see
        `memsync.local.compaction.compact_file`. Raises NotQuiet when the file is busy.

        A tombstone past the horizon goes only when `acknowledged` says every replica read
        it (rule 15): by default none does, so a file a hub shares keeps them all; pass
        `acknowledged=memsync.ALL` for a file no hub shares (`memsync compact` reads the
        config and does the right thing for a configured memory)."""
        from memsync.local.compaction import compact_file  # not on `add`'s path (start-up)

        return compact_file(
            self.path,
            now=_as_us(now),
            horizon_days=horizon_days,
            quiet_seconds=quiet_seconds,
            dry_run=dry_run,
            acknowledged=acknowledged,
            grace_seconds=grace_seconds,
            store=self._store(),
        )

    def _append(
        self,
        obj: dict[str, Any],
        now: int | None,
        *,
        fresh_id: bool = False,
        seen: Newest | None = None,
    ) -> Record:
        """Stamp, validate (through the one validator, `classify`) and append one record.
        `fresh_id`: the id was just drawn at random, so no record of it can exist yet;
        `seen`: a scan of the file for the record's id already made (only what was appended
        since is read again)."""
        # Before the lock (it takes it): a long-lived `Memory` (a server's) recovers what a
        # compaction killed since it opened left aside, before appending (rule 16).
        _recover(self.path)
        with file_lock(self.path, self.lock_timeout):
            at = now_us() if now is None else now
            obj["created_at"] = format_ts(self._stamp(None if fresh_id else obj["id"], at, seen))
            line = msgspec.json.encode(obj)
            parsed = classify(line, source=str(self.path))
            if not isinstance(parsed, Record):
                reason = parsed.reason if isinstance(parsed, Invalid) else "not a record"
                raise InvalidRecord(f"invalid record: {reason}")
            before = os.stat(self.path) if self.path.exists() else None
            append_bytes(self.path, line + b"\n", header=header_line(parsed.ts))
            carry_append(self.path, self.state_dir, before, len(line) + 1)
        return parsed

    def _stamp(self, rid: str | None, now: int, seen: Newest | None = None) -> int:
        """The `created_at` for a new record of `rid`: `core.clock.next_stamp` over the
        stamps near the end of the file and the newest record of `rid`."""
        size = self.path.stat().st_size if self.path.exists() else 0
        # The first line of a tail read may be cut; then it is simply invalid.
        tail = read_tail(self.path, size, _TAIL_FOR_CLOCK) if size else b""
        lines, _ = split_complete(tail, at_start=size <= _TAIL_FOR_CLOCK)
        recent = []
        for raw in lines:
            rec = classify(raw, source=str(self.path))
            if type(rec) is Record:
                recent.append(rec.ts)
        newest = None if rid is None else self._newest_of(rid, seen).newest
        return next_stamp(now, recent, newest)

    def _stored_newest(self, fd: int, rid: str) -> tuple[int | None, int] | None:
        """`idscan.stored_newest` in this memory's state directory (None: the default)."""
        return stored_newest(self.path, fd, rid, self.state_dir)

    def _newest_of(self, rid: str, since: Newest | None = None) -> Newest:
        """The newest `created_at` of any record of `rid`; scans only lines naming it.
        With `since` (an earlier scan for `rid`), only the bytes appended after it, when the
        file is the one it read (same inode, not shorter); else from where the file's
        persistent view stopped, when it has a valid one (issue 20); else the whole file."""
        fd = open_for_reading(self.path)
        try:
            st = os.fstat(fd)
            start, newest = 0, None
            if since is not None and since.ino == st.st_ino and since.end <= st.st_size:
                start, newest = since.end, since.newest
            elif since is None and (found := self._stored_newest(fd, rid)) is not None:
                newest, start = found
            end = start
            for chunk in read_chunks_fd(fd, start):
                end = chunk.end
                for rec in naming(chunk.lines, rid, str(self.path)):
                    newest = rec.ts if newest is None else max(newest, rec.ts)
        finally:
            os.close(fd)
        return Newest(newest, st.st_ino, end)

    def _current(self, rid: str) -> Record | None:
        from memsync.core.view import Index

        index = Index()
        for chunk in read_chunks(self.path):
            for rec in naming(chunk.lines, rid, str(self.path)):
                index.add(rec)
        return index.current(rid)


def _recover(path: Path) -> None:
    """`drain.recover_after_crash`, imported only when something was left aside
    (`asides_of`: nearly never; the drain's machinery is start-up time for `add`)."""
    if asides_of(path):
        from memsync.local.drain import recover_after_crash

        recover_after_crash(path)


def _as_us(value: int | datetime | None) -> int | None:
    if isinstance(value, datetime):
        return from_datetime(value)
    return value


def _as_text_ts(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        return format_ts(from_datetime(value))
    return value
