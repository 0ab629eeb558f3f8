"""Compactions and merges leave the persistent view up to date (issue 20): after a
compaction (a new inode, rule 15) the store describes the new file, so the next command
folds nothing; after a merge (appends only, rules 13 and 14) it folds only what the merge
appended. Either way, the same answers as a fold of the whole file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.core.digest import digest_of
from memsync.errors import UnsupportedFormat
from memsync.local import compaction_partitions
from memsync.local.acknowledgements import ALL
from memsync.local.compaction import compact_file
from memsync.local.located import located_view
from memsync.local.memory import Memory
from memsync.local.merge import merge_files
from memsync.local.reading import prompt_of, prompt_of_described
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import Resumed, ViewStore
from tests.helpers.examples import examples
from tests.helpers.paths import ROOT
from tests.helpers.records import T0, deciding_file, entry
from tests.helpers.strategies import HEADER, line_soups
from tests.helpers.strategies import NOW as SOUP_NOW

NOW = T0 + 10**12  # past every expiry of `deciding_file`


def answer(path: Path, store: ViewStore | None, now: int = NOW) -> tuple[object, ...]:
    """What readers of the view get at `now`: the live lines and ids, the bad lines, the
    files without a header, prompt blocks as `prompt` makes them, the view digest, the
    superseding entries and the twins."""
    with located_view([path], now, store, hashes=True) as view:
        blocks = []
        for scope, budget in (("github.com", 500), (None, 4000)):
            if view.resumed:
                blocks.append(
                    prompt_of_described(view.records, scope, budget, view.line, view.length)
                )
            else:
                blocks.append(prompt_of(view.records, scope, budget, view.lines()))
        return (
            list(view.lines()),
            [r.id for r in view.records],
            [(b.line, b.reason) for b in view.scan.bad],
            view.scan.headerless,
            blocks,
            digest_of(view.hashes()),
            view.scan.superseding,  # where the entries that supersede lie (handoff)
            [(a.id, view.line(a), view.line(b)) for a, b in view.scan.index.twins],  # twins
        )


def resumed(store: ViewStore, path: Path) -> Resumed | None:
    fd = open_for_reading(path)
    try:
        return store.resume(path, fd, str(path))
    finally:
        os.close(fd)


def _compacted_file(tmp_path: Path, n: int = 600) -> Path:
    """A file a compaction rewrites (tombstones past the horizon, superseded versions),
    with a bad line it moves aside."""
    path = deciding_file(tmp_path / "me.jsonl", n)
    with open(path, "ab") as f:
        f.write(b"{not json\n" + entry("late", 700.0) + b"\n")
    return path


def test_compact_file_leaves_the_store_of_the_file_it_wrote(tmp_path: Path) -> None:
    path = _compacted_file(tmp_path)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    before = answer(path, store)
    old_ino = path.stat().st_ino
    result = compact_file(
        path, quiet_seconds=0, horizon_days=0, grace_seconds=0, acknowledged=ALL, store=store
    )
    assert result.rewritten
    assert path.stat().st_ino != old_ino
    found = resumed(store, path)
    assert found is not None  # the first command after the compaction is warm
    assert found.offset == path.stat().st_size
    assert answer(path, store) == answer(path, None)
    # What the bad line and the dropped lines took away is only what the view never held.
    assert answer(path, None)[:2] == before[:2]


@pytest.mark.slow
@settings(max_examples=examples(0.3), deadline=None)
@given(lines=line_soups(30), partitioned=st.booleans())
def test_the_store_a_compaction_leaves_answers_as_a_fresh_fold(
    lines: list[bytes], partitioned: bool
) -> None:
    """Whatever the file held (versions, tombstones, twins, supersessions, expiry, bad
    lines), the store a compaction leaves, from the records it kept or (planned in
    partitions) from a fold of the new file, is that of the new file's bytes."""
    with tempfile.TemporaryDirectory(prefix="compactview-") as tmp:
        root = Path(tmp)
        path = root / "me.jsonl"
        path.write_bytes(HEADER + b"\n" + b"".join(line + b"\n" for line in lines))
        store = ViewStore(StateDir(root / "state"), min_bytes=0)
        try:
            answer(path, store, SOUP_NOW)
        except UnsupportedFormat:
            return  # a stray header of another format: nothing is read, nor compacted
        # A few partitions: one per 512 bytes.
        bytes_ = 512 if partitioned else compaction_partitions.PARTITION_BYTES
        with mock.patch.object(compaction_partitions, "PARTITION_BYTES", bytes_):
            result = compact_file(
                path,
                now=SOUP_NOW,
                quiet_seconds=0,
                horizon_days=0,
                grace_seconds=0,
                acknowledged=ALL,
                store=store,
            )
        found = resumed(store, path)
        if result.rewritten:
            assert found is not None
            assert found.offset == path.stat().st_size
        assert answer(path, store, SOUP_NOW) == answer(path, None, SOUP_NOW)
        with open(path, "ab") as f:  # folded past the store: a bad line's number is right
            f.write(b"{not json\n" + lines[0] + b"\n")
        assert answer(path, store, SOUP_NOW) == answer(path, None, SOUP_NOW)


@pytest.mark.slow
def test_memory_compact_with_a_state_directory_leaves_the_store(tmp_path: Path) -> None:
    path = _compacted_file(tmp_path, 3000)
    state = tmp_path / "state"
    mem = Memory(path, state_dir=state)
    mem.to_prompt(now=NOW)
    assert mem.compact(quiet_seconds=0, horizon_days=0, grace_seconds=0, acknowledged=ALL).rewritten
    store = ViewStore(StateDir(state))
    assert path.stat().st_size >= store.min_bytes  # (else no store is kept at all)
    found = resumed(store, path)
    assert found is not None
    assert found.offset == path.stat().st_size
    assert answer(path, store) == answer(path, None)


def test_a_merge_leaves_the_store_to_fold_only_what_it_appended(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 600)
    other = tmp_path / "other.jsonl"
    other.write_bytes(
        b"\n".join(
            [path.read_bytes().split(b"\n")[0]]
            + [entry(f"m{i:04d}", 800.0 + i) for i in range(50)]
            + [entry("e00010", 900.0, text="a later version from elsewhere")]
        )
        + b"\n"
    )
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(path, store)
    size = path.stat().st_size
    assert merge_files(path, [other]).appended == 51
    found = resumed(store, path)
    assert found is not None
    assert found.offset == size < path.stat().st_size  # only the appended bytes to fold
    assert answer(path, store) == answer(path, None)


def test_a_compaction_that_left_no_store_leaves_one_that_is_not_used(tmp_path: Path) -> None:
    """What a compaction killed after its rename and before its store was written leaves
    (here: one given no store): the store of the old inode, which is not used."""
    path = _compacted_file(tmp_path)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(path, store)
    assert compact_file(
        path, quiet_seconds=0, horizon_days=0, grace_seconds=0, acknowledged=ALL
    ).rewritten
    assert store.state.view_store(path).exists()
    assert resumed(store, path) is None
    assert answer(path, store) == answer(path, None)
    assert resumed(store, path) is not None  # written anew by that reader


_COMPACTOR = """
import sys
from pathlib import Path
from memsync.errors import UnsupportedFormat
from memsync.local import compaction_partitions
from memsync.local.acknowledgements import ALL
from memsync.local.compaction import compact_file
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
from tests.helpers.records import entry
path, state = Path(sys.argv[1]), StateDir(Path(sys.argv[2]))
store = ViewStore(state, min_bytes=0)
print("ready", flush=True)
n = 0
while True:
    with open(path, "ab") as f:  # something for each compaction to drop
        f.write(entry("e%05d" % (n % 500), 1000.0 + n) + b"\\n")
    n += 1
    compact_file(path, quiet_seconds=0, horizon_days=0, grace_seconds=0, acknowledged=ALL,
                 store=store)
"""


@pytest.mark.slow
def test_kill_9_during_compactions_that_write_the_store(tmp_path: Path) -> None:
    """A process compacting (and writing the new file's store) killed at any moment: the
    rename done and the store not yet written leaves the store of the old inode, which is
    not used; whatever the moment, the next reader answers as a fold of the whole file."""
    path = deciding_file(tmp_path / "me.jsonl", 1500)
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for delay in (0.05, 0.25, 0.5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _COMPACTOR, str(path), str(state)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store = ViewStore(StateDir(state), min_bytes=0)
        assert answer(path, store) == answer(path, None)
