"""The long-lived reader's cache (`LiveCache`, `Memory.to_prompt`'s) started from the
file's persistent view (issue 20): the same answers as a fold of the whole file, after
appends by another process and whatever happened to the file or the store since."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.local.compaction import compact_file
from memsync.local.livecache import LiveCache
from memsync.local.reading import scan
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
from tests.helpers.records import append_to_deciding_file, deciding_file, entry


def _answers(cache: LiveCache) -> tuple[list[bytes], str, str]:
    """The live lines, and the prompt blocks a server renders, by a cache."""
    return (
        [r.raw for r in cache.records()],
        cache.prompt(None, 4000, markdown=True),
        cache.prompt("github.com", None),
    )


def test_a_cache_started_from_the_store_answers_as_a_full_fold(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 600)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    first = LiveCache(path, store)
    assert _answers(first) == _answers(LiveCache(path))  # the store built on a first read
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "elsewhere")}
    append_to_deciding_file(path, env)
    # A server started now: from the store, folding only the appended lines.
    seeded = LiveCache(path, store)
    assert _answers(seeded) == _answers(LiveCache(path))
    assert 0 < seeded.bytes_read < path.stat().st_size // 10
    # The running one folds the appended lines forward, as before.
    assert _answers(first) == _answers(LiveCache(path))


def test_a_stale_store_never_gives_a_wrong_answer(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 600)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=0)
    LiveCache(path, store).index()
    size = path.stat().st_size

    # Replaced by a compaction (a new file, rule 15): the tombstones and beaten versions
    # are gone, the store is of the old inode.
    compact_file(path, horizon_days=0, quiet_seconds=0, grace_seconds=0)
    assert path.stat().st_size < size
    assert _answers(LiveCache(path, store)) == _answers(LiveCache(path))

    # Truncated to half, then grown past its old size with other lines.
    LiveCache(path, store).index()
    data = path.read_bytes()
    cut = data[: data.index(b"\n", len(data) // 2) + 1]
    with open(path, "r+b") as f:
        f.truncate(len(cut))
        f.seek(len(cut))
        f.write(b"".join(entry(f"n{i:04d}", 9000 + i) + b"\n" for i in range(len(data) // 80)))
    assert path.stat().st_size > len(data)
    assert _answers(LiveCache(path, store)) == _answers(LiveCache(path))

    # A corrupt store.
    LiveCache(path, store).index()
    target = store.state.view_store(path)
    blob = bytearray(target.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    target.write_bytes(bytes(blob))
    assert _answers(LiveCache(path, store)) == _answers(LiveCache(path))


@pytest.mark.parametrize("stored", [True, False])
def test_a_running_cache_reads_its_lines_from_the_file_it_describes(
    tmp_path: Path, stored: bool
) -> None:
    """The cache holds no line (issue 20): it reads them again from the file it holds
    open. A compaction replacing the file (rule 15) and appends since: the same answers
    as a fold of the whole file, and the same record as a fold's for each id."""
    path = deciding_file(tmp_path / "me.jsonl", 600)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0) if stored else None
    cache = LiveCache(path, store)
    assert _answers(cache) == _answers(LiveCache(path))
    compact_file(path, horizon_days=0, quiet_seconds=0, grace_seconds=0)
    assert _answers(cache) == _answers(LiveCache(path))
    with open(path, "ab") as f:
        f.write(entry("e00003", 9000, text="a later version") + b"\n")
    assert _answers(cache) == _answers(LiveCache(path))
    whole = scan([path]).index
    with cache.reading() as (index, line):
        for rid in ("e00003", "e00004", "e00010", "e00012"):
            found, expected = index.current(rid), whole.current(rid)
            assert (line(found) if found else None) == (expected.raw if expected else None)
