"""A cold indexed merge (memsync.local.merge.merge_indexed past `COLD_BYTES`) streams its
destination, then a second process builds the index (memsync.local.indexbuild): the
bytes it appends and its report must be a warm merge's, the index the builder leaves
must be current (cursors and held records included), whoever opens it meanwhile waits,
and a builder killed at any instant leaves an index the next refresh can trust."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

import memsync.local.batching
import memsync.local.merge
from memsync.core.scan import line_digest
from memsync.core.timestamps import SECOND, format_ts
from memsync.local.fileindex import Cursor, FileIndex, build_lock
from memsync.local.fresh import header_line
from memsync.local.indexbuild import start_build
from memsync.local.merge import MergeResult, merge_indexed
from memsync.local.statedir import StateDir

BASE = 1_790_000_000 * SECOND
EARLY = BASE - 86_400 * SECOND + 5_000 * SECOND
"""A merge's `now` at which records dated after BASE + 5,000 s are held (rule 11)."""


def _lines(seed: int, count: int) -> list[bytes]:
    """Entries, tombstones and supersessions over a few dozen ids, in shuffled order."""
    rng = random.Random(seed)
    ids = [f"id{i:03d}" for i in range(40)]
    out = []
    for n in range(count):
        rid = rng.choice(ids)
        obj: dict[str, object] = {"id": rid, "kind": "fact", "text": f"{rid} #{n}"}
        obj["created_at"] = format_ts(BASE + rng.randrange(10_000) * SECOND)
        if rng.random() < 0.15:
            obj = {"id": rid, "deleted": True, "created_at": obj["created_at"]}
        elif rng.random() < 0.05:
            obj["supersedes"] = rng.choice(ids)
        out.append(json.dumps(obj).encode())
    return out


def _file(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(header_line(BASE) + b"".join(line + b"\n" for line in lines))
    return path


def _merge(
    mp: pytest.MonkeyPatch, dest: Path, src: Path, state: Path, now: int, *, cold: bool
) -> MergeResult:
    mp.setattr(memsync.local.merge, "COLD_BYTES", 0 if cold else 1 << 40)
    return merge_indexed(dest, [src], StateDir(state), now=now)


def _bytes(path: Path) -> bytes:
    """The file's bytes, but for the random generation token of a header it was created
    with (rule 2: new at each creation, so two merges into empty files differ there)."""
    return re.sub(rb'"generation":"[0-9a-f]+"', b"", path.read_bytes(), count=1)


def _report(result: MergeResult) -> dict[str, object]:
    doc = result.to_json()
    doc.pop("dest")
    return doc


@pytest.mark.parametrize("by_id", [False, True], ids=["in-order", "by-id"])
@pytest.mark.parametrize("held", [False, True], ids=["into-empty", "into-held"])
def test_a_cold_merge_appends_the_bytes_of_a_warm_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_id: bool, held: bool
) -> None:
    """Cold and warm, the same bytes and the same report, records held for being dated
    ahead included; then the next merge (warm for both) offers those again, and both
    indexes are current: they hold every line's digest and read nothing more."""
    if by_id:
        monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    src = _file(tmp_path / "src.jsonl", _lines(1, 600))
    cold, warm = tmp_path / "cold.jsonl", tmp_path / "warm.jsonl"
    if held:
        _file(cold, _lines(2, 200))
        shutil.copyfile(cold, warm)
    first_cold = _merge(monkeypatch, cold, src, tmp_path / "state-cold", EARLY, cold=True)
    first_warm = _merge(monkeypatch, warm, src, tmp_path / "state-warm", EARLY, cold=False)
    assert first_cold.held
    assert first_cold.appended > 0
    assert _report(first_cold) == _report(first_warm)
    assert _bytes(cold) == _bytes(warm)
    # Opened, the index waits for its builder: then it holds the whole file, the source's
    # cursor and the held records, as the warm merge's index does.
    with (
        FileIndex(cold, StateDir(tmp_path / "state-cold").merge_index(cold)) as built,
        FileIndex(warm, StateDir(tmp_path / "state-warm").merge_index(warm)) as kept,
    ):
        assert built.refresh() == 0
        assert build_lock(built.db_path) == StateDir(tmp_path / "state-cold").merge_index_build(
            cold
        )
        assert build_lock(built.db_path).exists()
        assert built.held() == kept.held()
        assert built.cursor(os.path.realpath(src)) == kept.cursor(os.path.realpath(src))
    with src.open("ab") as f:
        f.write(b"".join(line + b"\n" for line in _lines(3, 100)))
    second_cold = _merge(monkeypatch, cold, src, tmp_path / "state-cold", BASE, cold=True)
    second_warm = _merge(monkeypatch, warm, src, tmp_path / "state-warm", BASE, cold=False)
    assert not second_cold.held
    assert second_cold.appended > 0
    assert _report(second_cold) == _report(second_warm)
    assert _bytes(cold) == _bytes(warm)
    with FileIndex(cold, StateDir(tmp_path / "state-cold").merge_index(cold)) as index:
        assert index.refresh() == 0
        assert set(index.digests()) == set(map(line_digest, cold.read_bytes().splitlines()))
    assert merge_indexed(cold, [src], StateDir(tmp_path / "state-cold"), now=BASE).appended == 0


def test_the_builder_indexes_the_file_up_to_its_stop_with_cursors_and_held(
    tmp_path: Path,
) -> None:
    lines = _lines(4, 300)
    path = _file(tmp_path / "m.jsonl", lines)
    stop = len(header_line(BASE)) + sum(len(line) + 1 for line in lines[:200])
    db = tmp_path / "index.sqlite"
    cursor = Cursor(7, 1234, 56, b"tail")
    with FileIndex(path, db) as index:
        assert start_build(index, stop, {"/src": cursor}, [("/src", 9, b'{"id": "x"}')])
    with FileIndex(path, db) as index:  # once the builder is done
        assert index.offset == stop
        assert index.cursor("/src") == cursor
        assert index.held() == [("/src", 9, b'{"id": "x"}')]
        assert index.refresh() == path.stat().st_size - stop  # the rest, not all again
        assert set(index.digests()) == set(map(line_digest, path.read_bytes().splitlines()))


def test_opening_an_index_waits_for_its_builder(tmp_path: Path) -> None:
    path = _file(tmp_path / "m.jsonl", _lines(5, 20_000))
    db = tmp_path / "index.sqlite"
    with FileIndex(path, db) as index:
        builder = start_build(index, path.stat().st_size, {}, [])
    assert builder is not None
    with FileIndex(path, db) as index:
        assert index.offset == path.stat().st_size  # built before it could be opened


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3, 1.0])
def test_a_builder_killed_at_any_instant_leaves_an_index_refresh_can_trust(
    tmp_path: Path, delay: float
) -> None:
    """Killed before its commit, the build is rolled back, cursors unmoved; after it, it
    is whole: either way `refresh` brings the index to exactly the file's lines."""
    path = _file(tmp_path / "m.jsonl", _lines(5, 20_000))
    db = tmp_path / "index.sqlite"
    with FileIndex(path, db) as index:
        builder = start_build(index, path.stat().st_size, {"/src": Cursor(1, 2, 3, b"")}, [])
    assert builder is not None
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.kill(builder, signal.SIGKILL)
    with FileIndex(path, db) as index:  # once the killed builder's lock is released
        assert index.offset in (0, path.stat().st_size)
        assert (index.cursor("/src") is None) == (index.offset == 0)
        index.refresh()
        assert set(index.digests()) == set(map(line_digest, path.read_bytes().splitlines()))
