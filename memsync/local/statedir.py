"""The state directory: the one owner of its layout (DESIGN.md "Local files").

Everything memsync keeps on this machine outside the memory files is here, and only this
module says where. Every other module asks a `StateDir` for a file by what it is
(`state.sync_state(memory, remote)`, `state.merge_index(path)`), never joins names onto
the root itself.

```
<state dir>/                 (0700; default $XDG_STATE_HOME/memsync, ~/.local/state/memsync)
  replica                    this machine's replica id, made once (host name + random)
  install                    this installation's token, written in our hub files' headers
  retired.json               replicas `memsync forget-replica` told us to forget
  status.json                the daemon's last status, read by `memsync status`
  daemon.lock                the daemon's PID lock: one daemon per state directory
  daemon.pid                 the pid of the daemon holding that lock
  sync/<memory>/             per memory, per remote (0700):
    <remote>.json              the pass's state: offsets and tails read, our hub file, marks
    <remote>.hub.sqlite        digests of the lines the hub holds (`fileindex.DigestStore`)
    <remote>.lock              one sync pass (or hub compaction) at a time, across processes
    <remote>.codec             what our own hub file was last written with (plain or a key id)
    <remote>.replacing         intents: size and digest of each replace of our hub file begun
    <remote>.receipts          our last receipt's time and positions; peers' receipts read
  index/<name>-<key>.sqlite  a memory file's merge index (`fileindex.FileIndex`)
  recall/<name>-<key>.sqlite a memory file's full-text recall index (`fulltext.TextIndex`)
  imports/<name>-<key>.keys  the keys `memsync import` found or put in a memory file
  bridges/<name>-<key>.json  what memsync last rendered into a bridged file (issue 22)
  bridges/<name>-<key>.lock  one sync of a bridged file at a time
  view/<name>-<key>.view     a memory file's persistent view (`viewstore.ViewStore`)
  view/<name>-<key>.ranks    its quick part, read in place: per id, and the prompt's order
  view/<name>-<key>.seen     a note that spares the check of the bytes it folded
  view/<name>-<key>.building held (flock) by a detached process writing the view
```

`<name>` is a memory file's name cut to 40 characters, `<key>` a hash of its real path,
so two files with one name in different folders never share an index.

Everything here is a cache or a record of this machine's own acts. A cache is checked
against the file it describes before each use (device, inode, size, digests of what it
already folded) and rebuilt when in doubt. So deleting the directory, or any file in it,
costs time (a full re-read, a rebuilt index, a new install token), never a wrong answer,
a lost record or a resurrected one (bar one: without its import ledger, importing a source
again brings back what was imported from it, forgotten, and compacted away past the
tombstone horizon; and without what it last rendered into a bridged file, a line the
person deleted from the block since is not taken as a deletion). The names are kept stable across versions: a rename
would orphan every user's state (tests/local/test_statedir.py pins them).

Adding a file is one method here: a property for a file of the whole machine, a method
taking what it is per (a memory and a remote, a memory file) for the others, built with
`_under`. Folders are made 0700 by whoever writes (`prepared`, or `sqlitedb.connect`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeAlias

import msgspec
import xxhash

from memsync.local.dirs import default_state_dir
from memsync.local.storage import private_dirs

__all__ = ["StateDir", "StateDirLike"]


class StateDir(msgspec.Struct, frozen=True):
    """A state directory at `root`: names the files it holds (see the module docstring).

    Naming is pure (no I/O); `prepared` makes the folders a file needs.
    """

    root: Path

    def __str__(self) -> str:
        return str(self.root)

    @classmethod
    def of(cls, value: StateDirLike | None = None) -> StateDir:
        """Convert at the public boundary: a `StateDir` as is, a path wrapped, None the
        default (`$XDG_STATE_HOME/memsync`, else `~/.local/state/memsync`)."""
        if isinstance(value, StateDir):
            return value
        return cls(default_state_dir() if value is None else Path(value))

    def prepared(self, path: Path) -> Path:
        """`path` (a file of this directory) after making the folders above it, 0700."""
        private_dirs(path.parent)
        return path

    def _under(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    # Files of the whole machine

    @property
    def replica_id(self) -> Path:
        """This machine's replica id (`memsync.hub.state.resolve_replica`)."""
        return self._under("replica")

    @property
    def install_token(self) -> Path:
        """This installation's token (`memsync.hub.state.install_token`)."""
        return self._under("install")

    @property
    def retired(self) -> Path:
        """The replicas to forget, a JSON list (`memsync forget-replica`)."""
        return self._under("retired.json")

    @property
    def daemon_status(self) -> Path:
        """The daemon's status document (`memsync.daemon.status`)."""
        return self._under("status.json")

    @property
    def daemon_lock(self) -> Path:
        """The daemon's PID lock: one daemon per state directory."""
        return self._under("daemon.lock")

    @property
    def daemon_pid(self) -> Path:
        """The pid of the daemon holding `daemon_lock`."""
        return self._under("daemon.pid")

    # Per memory and remote: what a sync pass remembers (memsync.hub.state)

    def sync_state(self, memory: str, remote: str) -> Path:
        """The pass's state (`memsync.hub.state.SyncState`)."""
        return self._under("sync", memory, f"{remote}.json")

    def hub_index(self, memory: str, remote: str) -> Path:
        """The digests of the lines the hub holds (`memsync.local.fileindex.DigestStore`)."""
        return self._under("sync", memory, f"{remote}.hub.sqlite")

    def sync_lock(self, memory: str, remote: str) -> Path:
        """One pass at a time for a memory and a remote (`memsync.hub.state.pass_lock`)."""
        return self._under("sync", memory, f"{remote}.lock")

    def codec_marker(self, memory: str, remote: str) -> Path:
        """What our own hub file was last written with: `plain` or a key id
        (`memsync.hub.codec`)."""
        return self._under("sync", memory, f"{remote}.codec")

    def replace_intents(self, memory: str, remote: str) -> Path:
        """What each replace of our own hub file begun and not yet recorded in the pass's
        state will leave there: size and digest (`memsync.hub.state.ReplaceIntents`)."""
        return self._under("sync", memory, f"{remote}.replacing")

    def receipts(self, memory: str, remote: str) -> Path:
        """When our receipt was last published and the peers' receipts as last read
        (`memsync.hub.receipts.ReceiptState`)."""
        return self._under("sync", memory, f"{remote}.receipts")

    # Per memory file on this machine

    def merge_index(self, dest: Path) -> Path:
        """The persistent merge index of memory file `dest` (`memsync.local.fileindex`)."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(dest)))
        return self._under("index", f"{dest.name[:40]}-{key}.sqlite")

    def merge_index_build(self, dest: Path) -> Path:
        """The lock a builder of `dest`'s merge index holds while it runs
        (`memsync.local.indexbuild`; `fileindex.build_lock` of `merge_index(dest)`)."""
        return self.merge_index(dest).with_suffix(".build")

    def recall_index(self, path: Path) -> Path:
        """The full-text index of memory file `path` (`memsync.local.fulltext`)."""
        key = _sha256(str(path.resolve()).encode()).hexdigest()[:16]
        return self._under("recall", f"{path.name[:40]}-{key}.sqlite")

    def import_ledger(self, dest: Path) -> Path:
        """The keys of the entries `memsync import` found in or appended to memory file
        `dest`, one `<id> <created_at in µs>` a line (`memsync.local.importers`): one
        imported and forgotten since is not imported again, even once compaction has
        dropped its line and its tombstone (issue 24, item 7)."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(dest)))
        return self._under("imports", f"{dest.name[:40]}-{key}.keys")

    def bridge_rendered(self, bridged: Path) -> Path:
        """What memsync last rendered into bridged file `bridged` (issue 22): the block's
        text and the ids behind each line (`memsync.core.bridge_block.Rendered.to_json`),
        from which a person's edits to the block are told apart. Keyed by the file's real
        path (a symlinked file is its target's)."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(bridged)))
        return self._under("bridges", f"{bridged.name[:40]}-{key}.json")

    def bridge_lock(self, bridged: Path) -> Path:
        """One sync of bridged file `bridged` at a time, across processes (the daemon and
        `memsync bridge sync`): else both would read the same edits of its block."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(bridged)))
        return self._under("bridges", f"{bridged.name[:40]}-{key}.lock")

    def view_store(self, path: Path) -> Path:
        """The persistent view of memory file `path`: its fold, checked against the file
        before each use (`memsync.local.viewstore`)."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(path)))
        return self._under("view", f"{path.name[:40]}-{key}.view")

    def view_build_lock(self, path: Path) -> Path:
        """Held by a detached process while it writes the persistent view of memory file
        `path` (`memsync.local.viewbuild`): a command that finds no store waits for it."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(path)))
        return self._under("view", f"{path.name[:40]}-{key}.building")

    def view_ranks(self, path: Path) -> Path:
        """The quick part of the persistent view of memory file `path`, read in place
        without decoding it whole: each id's versions and the live entries in the prompt's
        drop order (`memsync.local.viewranks`), checked against the file before each use."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(path)))
        return self._under("view", f"{path.name[:40]}-{key}.ranks")

    def view_seen(self, path: Path) -> Path:
        """A note that memory file `path`, while its status (`fstat`) stays exactly the
        one noted, begins with the bytes its persistent view folded: the next check reads
        none of them (`memsync.local.foldcheck`)."""
        key = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(path)))
        return self._under("view", f"{path.name[:40]}-{key}.seen")


StateDirLike: TypeAlias = StateDir | str | os.PathLike[str]
"""What the public API accepts for a state directory: a `StateDir` or its path."""


def _sha256(data: bytes) -> Any:
    """SHA-256 of `data`, from CPython's own `_sha256` where there is one: `hashlib` loads
    OpenSSL (about 3 ms of a `recall`'s start-up, issue 20) for the one key of its index's
    name. The same digest either way; `hashlib` where the built-in module is missing."""
    try:  # 3.11 names it `_sha256`, 3.12 `_sha2`
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return sha256(data)
