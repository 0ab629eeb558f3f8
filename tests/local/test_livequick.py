"""The MCP server's view (`LiveQuick`, issue 20): the file's quick part held between calls
and folded forward. Its prompt blocks, current versions and newest instants are those of a
fold of the whole file, after appends by another process, expiries, a compaction, a
truncation and a damaged quick part; the quick part is opened once, not at every call."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memsync.core.timestamps import SECOND, format_ts
from memsync.local import livequick
from memsync.local.compaction import compact_file
from memsync.local.fresh import now_us
from memsync.local.livequick import LiveQuick
from memsync.local.located import located_index, located_view
from memsync.local.reading import prompt_of, scan
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
from tests.helpers.records import append_to_deciding_file, deciding_file, entry

HOUR = 3600 * SECOND
IDS = ("e00003", "e00004", "e00005", "e00010", "s00005", "x00002", "late", "absent")
BLOCKS = ((None, 4000, True), ("github.com", 1500, False), (None, 200, True))


Answers = tuple[list[str], list[bytes | None], list[int | None]]


def _folded(path: Path, now: int) -> Answers:
    """The blocks of `BLOCKS`, and the current line and newest instant of each of `IDS`,
    from a fold of the whole file."""
    with located_view([path], now) as view:
        blocks = [
            prompt_of(view.records, scope, budget, view.lines(), markdown=md)
            for scope, budget, md in BLOCKS
        ]
    index = scan([path]).index
    current = [(c.raw if (c := index.current(rid)) else None) for rid in IDS]
    newest = [_newest(path, rid) for rid in IDS]
    return blocks, current, newest


def _newest(path: Path, rid: str) -> int | None:
    """The newest `created_at` of any record of `rid`: each class keeps its latest (rule 9)."""
    index = scan([path]).index
    found = [t[rid].ts for t in (index.tombs, index.user, index.inferred) if rid in t]
    return max(found, default=None)


def _held(view: LiveQuick, path: Path, now: int) -> Answers:
    blocks = [view.prompt(scope, budget, markdown=md, now=now) for scope, budget, md in BLOCKS]
    current = [(c.raw if (c := view.current(rid)) else None) for rid in IDS]
    newest = []
    for rid in IDS:
        known = view.newest(rid)
        assert known is not None
        assert known[1:] == (path.stat().st_ino, path.stat().st_size)
        newest.append(known[0])
    return blocks, current, newest


def _stored(tmp_path: Path, n: int = 600) -> tuple[Path, ViewStore]:
    path = deciding_file(tmp_path / "me.jsonl", n)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    with located_index(path, store):
        pass  # the store and its quick part written
    return path, store


def test_the_held_quick_part_answers_as_a_fold_after_appends(tmp_path: Path) -> None:
    path, store = _stored(tmp_path)
    view = LiveQuick(path, store)
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)
    append_to_deciding_file(path, {**os.environ, "XDG_STATE_HOME": str(tmp_path / "elsewhere")})
    with open(path, "ab") as f:  # a later version, and one that expires in an hour
        f.write(entry("e00003", 9000, text="a later version") + b"\n")
        f.write(b'{"id": "late", "kind": "fact", "text": "for an hour", "created_at": "')
        f.write(f'{format_ts(now)}", "expires_at": "{format_ts(now + HOUR)}"}}\n'.encode())
    assert _held(view, path, now + 1) == _folded(path, now + 1)
    # The file unchanged, the clock past the expiry: the block is rendered again.
    assert _held(view, path, now + 2 * HOUR) == _folded(path, now + 2 * HOUR)
    assert view.opened == 1  # the appended lines folded into the one opened first


def test_a_rewritten_file_or_a_damaged_quick_part_is_never_trusted(tmp_path: Path) -> None:
    path, store = _stored(tmp_path)
    view = LiveQuick(path, store)
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)

    # Replaced by a compaction (rule 15): another inode, tombstones and beaten versions gone.
    compact_file(path, horizon_days=0, quiet_seconds=0, grace_seconds=0)
    assert _held(view, path, now) == _folded(path, now)

    # Truncated to half, then grown past its old size with other lines.
    data = path.read_bytes()
    cut = data[: data.index(b"\n", len(data) // 2) + 1]
    with open(path, "r+b") as f:
        f.truncate(len(cut))
        f.seek(len(cut))
        f.write(b"".join(entry(f"n{i:04d}", 9000 + i) + b"\n" for i in range(len(data) // 80)))
    assert path.stat().st_size > len(data)
    assert _held(view, path, now) == _folded(path, now)

    # A damaged quick part, read by a server that had not opened it yet.
    with located_index(path, store):
        pass
    target = store.state.view_ranks(path)
    blob = bytearray(target.read_bytes())
    blob[-100] ^= 0xFF
    target.write_bytes(bytes(blob))
    assert _held(LiveQuick(path, store), path, now) == _folded(path, now)


def test_a_small_file_has_no_quick_part_and_the_fold_answers(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 60)
    view = LiveQuick(path, ViewStore(StateDir(tmp_path / "state")))  # under MIN_BYTES
    now = now_us()
    blocks = [view.prompt(scope, budget, markdown=md, now=now) for scope, budget, md in BLOCKS]
    assert blocks == _folded(path, now)[0]
    # At the local clock, from this process's cache of the small file, after an append too
    # (the file's expiries are long past: the clock moving on changes nothing).
    assert [view.prompt(s, b, markdown=md) for s, b, md in BLOCKS] == blocks
    with open(path, "ab") as f:
        f.write(entry("e00003", 9000, text="a later version") + b"\n")
    assert [view.prompt(s, b, markdown=md) for s, b, md in BLOCKS] == _folded(path, now_us())[0]
    assert [(c.raw if (c := view.current(rid)) else None) for rid in IDS] == _folded(path, now)[1]
    assert view.newest("e00003") is None
    assert view.opened == 0


def test_far_behind_the_store_is_written_again_by_another_process(tmp_path: Path) -> None:
    """Past `save_after` bytes appended, the quick part held still answers (folded
    forward) while another process writes the store again; then the new one is taken."""
    path = deciding_file(tmp_path / "me.jsonl", 600)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=4096)
    with located_index(path, store):
        pass
    view = LiveQuick(path, store)
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)
    with open(path, "ab") as f:
        f.write(b"".join(entry(f"n{i:04d}", 9000 + i) + b"\n" for i in range(80)))
    block = view.prompt(None, 4000, markdown=True, now=now)  # the first call past it
    assert view.rewriting is not None  # started by that call, which answered meanwhile
    assert block == _folded(path, now)[0][0]
    assert _held(view, path, now) == _folded(path, now)
    assert view.rewriting.wait(60) == 0
    assert _held(view, path, now) == _folded(path, now)
    assert view.opened == 2  # the quick part the other process wrote


def test_a_cold_file_has_its_store_written_by_another_process(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 600)
    view = LiveQuick(path, ViewStore(StateDir(tmp_path / "state"), min_bytes=0))
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)
    assert view.rewriting is not None
    assert view.rewriting.returncode == 0
    assert view.opened == 1


def test_without_another_process_the_server_folds_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter to start (an embedded one): the fold answers, in this process."""
    path = deciding_file(tmp_path / "me.jsonl", 600)
    view = LiveQuick(path, ViewStore(StateDir(tmp_path / "state"), min_bytes=0))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)
    assert view.rewriting is None


def test_checking_every_block_at_start_keeps_the_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check_all` (a server's warming thread): every block of a whole quick part checked,
    a few at a time, the answers those of a fold; a damaged one discarded, a fold
    answering instead."""
    monkeypatch.setattr(livequick, "_CHECKED_AT_ONCE", 1)  # (a small file: few blocks)
    path, store = _stored(tmp_path, 2000)
    view = LiveQuick(path, store)
    view.check_all()
    with view.held() as quick:
        assert quick is not None
        assert quick._pages.blocks > 1
        assert quick._pages.checked == set(range(quick._pages.blocks))
    now = now_us()
    assert _held(view, path, now) == _folded(path, now)

    target = store.state.view_ranks(path)
    blob = bytearray(target.read_bytes())
    blob[-100] ^= 0xFF  # in the columns' last block
    target.write_bytes(bytes(blob))
    damaged = LiveQuick(path, store)
    damaged.check_all()
    assert not target.exists()
    assert _held(damaged, path, now) == _folded(path, now)
