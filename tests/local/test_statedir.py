"""The state directory's layout (`memsync.local.statedir`): one owner, stable names.

The relative paths are pinned literally: a rename would orphan every user's state (a
full re-read, a new install token, a forgotten retirement), so it must fail here first.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memsync import Memory, StateDir, import_mcp_memory, recall, sync_once
from memsync.hub.compaction import compact_memory
from memsync.hub.state import install_token, pass_lock, resolve_replica, set_retired
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.local.fulltext import fts5_available

# A path with no symbolic link on the way: its real path, so its hash, is the same anywhere.
FILE = Path("/nonexistent-memsync/me.jsonl")
LONG = Path("/nonexistent-memsync/a-memory-file-with-a-name-longer-than-forty-characters.jsonl")

PINNED = {
    "replica_id": "replica",
    "install_token": "install",
    "retired": "retired.json",
    "daemon_status": "status.json",
    "daemon_lock": "daemon.lock",
    "daemon_pid": "daemon.pid",
    "sync_state": "sync/notes/nas.json",
    "hub_index": "sync/notes/nas.hub.sqlite",
    "sync_lock": "sync/notes/nas.lock",
    "codec_marker": "sync/notes/nas.codec",
    "replace_intents": "sync/notes/nas.replacing",
    "receipts": "sync/notes/nas.receipts",
    "merge_index": "index/me.jsonl-2a7db0fa168e955e.sqlite",
    "merge_index_build": "index/me.jsonl-2a7db0fa168e955e.build",
    "recall_index": "recall/me.jsonl-7c885f29a6a89125.sqlite",
    "import_ledger": "imports/me.jsonl-2a7db0fa168e955e.keys",
    "bridge_rendered": "bridges/me.jsonl-2a7db0fa168e955e.json",
    "bridge_lock": "bridges/me.jsonl-2a7db0fa168e955e.lock",
    "view_store": "view/me.jsonl-2a7db0fa168e955e.view",
    "view_build_lock": "view/me.jsonl-2a7db0fa168e955e.building",
    "view_ranks": "view/me.jsonl-2a7db0fa168e955e.ranks",
    "view_seen": "view/me.jsonl-2a7db0fa168e955e.seen",
}


def _named(state: StateDir, path: Path = FILE) -> dict[str, Path]:
    """Every file a `StateDir` names, by the name of what names it."""
    return {
        "replica_id": state.replica_id,
        "install_token": state.install_token,
        "retired": state.retired,
        "daemon_status": state.daemon_status,
        "daemon_lock": state.daemon_lock,
        "daemon_pid": state.daemon_pid,
        "sync_state": state.sync_state("notes", "nas"),
        "hub_index": state.hub_index("notes", "nas"),
        "sync_lock": state.sync_lock("notes", "nas"),
        "codec_marker": state.codec_marker("notes", "nas"),
        "replace_intents": state.replace_intents("notes", "nas"),
        "receipts": state.receipts("notes", "nas"),
        "merge_index": state.merge_index(path),
        "merge_index_build": state.merge_index_build(path),
        "recall_index": state.recall_index(path),
        "import_ledger": state.import_ledger(path),
        "bridge_rendered": state.bridge_rendered(path),
        "bridge_lock": state.bridge_lock(path),
        "view_store": state.view_store(path),
        "view_build_lock": state.view_build_lock(path),
        "view_ranks": state.view_ranks(path),
        "view_seen": state.view_seen(path),
    }


def test_the_names_of_existing_state_directories_are_stable() -> None:
    state = StateDir(Path("/st"))
    named = _named(state)
    assert {k: p.relative_to("/st").as_posix() for k, p in named.items()} == PINNED
    # Every file the class names is listed here: a new one gets its pinned name too.
    public = {
        name
        for name in dir(StateDir)
        if not name.startswith("_") and name not in {"root", "of", "prepared"}
    }
    assert public == set(PINNED)


def test_every_file_is_under_the_root_and_distinct() -> None:
    state = StateDir(Path("/st"))
    named = _named(state)
    assert all(p.is_relative_to("/st") for p in named.values())
    assert len(set(named.values())) == len(named)
    other = _named(state, Path("/elsewhere/me.jsonl"))
    # One file name in two folders: never one index for both.
    assert other["merge_index"] != named["merge_index"]
    assert other["recall_index"] != named["recall_index"]
    assert other["import_ledger"] != named["import_ledger"]


def test_a_long_file_name_is_cut_to_40_characters_and_keyed_by_its_path() -> None:
    state = StateDir(Path("/st"))
    assert state.merge_index(LONG).name == (
        "a-memory-file-with-a-name-longer-than-fo-38ddc5b70bc4d3b2.sqlite"
    )
    assert state.recall_index(LONG).name == (
        "a-memory-file-with-a-name-longer-than-fo-28abcc53030877cb.sqlite"
    )


def test_of_converts_at_the_public_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StateDir(tmp_path)
    assert StateDir.of(state) is state
    assert StateDir.of(str(tmp_path)) == state
    assert StateDir.of(tmp_path) == state
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert StateDir.of() == StateDir(tmp_path / "xdg" / "memsync")
    assert str(state) == str(tmp_path)


def test_prepared_makes_private_folders_and_names_nothing_else(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "a" / "state")
    lock = state.prepared(state.sync_lock("notes", "nas"))
    assert lock == state.sync_lock("notes", "nas")
    assert not lock.exists()
    for folder in (tmp_path / "a", state.root, state.root / "sync", lock.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_every_file_memsync_writes_there_is_one_it_names(tmp_path: Path) -> None:
    """A real pass, compaction, recall and the replica's own files: whatever lands in the
    state directory is a file `StateDir` names (SQLite's own side files aside), so the
    layout is decided in one place."""
    root = tmp_path / "state"
    hub = tmp_path / "hub"
    hub.mkdir()
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "the state directory has one owner")
    state = StateDir(root)
    resolve_replica(None, state)
    install_token(state)
    set_retired(state, {"old"})
    with pass_lock(state, "notes", "nas"):
        pass
    report = sync_once(  # the public form: a path as a string
        memory="notes",
        local=mem.path,
        remote="nas",
        transport=LocalDirTransport(hub),
        replica="laptop",
        state_dir=str(root),
    )
    assert report.error is None
    compact_memory(
        mem.path,
        memory="notes",
        remotes=["nas"],
        replica="laptop",
        state_dir=state,
        quiet_seconds=0,
    )
    if fts5_available():
        assert [h.text for h in recall(mem.path, "owner", state_dir=os.fspath(root))]
    graph = tmp_path / "graph.jsonl"
    graph.write_text(
        '{"type": "entity", "name": "memsync", "entityType": "tool", "observations": ["x"]}\n'
    )
    assert import_mcp_memory(graph, mem.path, state_dir=state).appended == 1
    named = set(_named(state, mem.path).values())
    found = {
        p
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal"))
    }
    assert found, "nothing was written"
    assert found <= named, sorted(map(str, found - named))
