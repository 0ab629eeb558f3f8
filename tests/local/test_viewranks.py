"""The quick part of the persistent view (`memsync.local.viewranks`, issue 20): its prompt
blocks, live versions and newest instants are those of a fold of the whole file, whatever
was appended, forgotten, superseded or expired since it was written, and whatever happened
to it or to the file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.timestamps import MS, format_ts
from memsync.errors import UnsupportedFormat
from memsync.local.located import located_view
from memsync.local.placed import lines_at
from memsync.local.reading import prompt_of
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading, read_chunks
from memsync.local.viewranks import FENCE, Damaged
from memsync.local.viewranks_open import open_quick, stored_prompt
from memsync.local.viewstore import ViewStore
from tests.helpers.examples import examples
from tests.helpers.strategies import HEADER, NOW, T0, line_soups
from tests.helpers.view_lines import IDS, MINUTE, entries

BUDGETS = ((None, 1024), ("api.github.com", 1024), (None, 1500), ("project:x", 4000))
LATER = (NOW, NOW + 2 * MINUTE, NOW + 9 * MINUTE)


def fold_answers(path: Path) -> tuple[object, ...]:
    """The blocks, live lines and newest instants of a fold of the whole file."""
    blocks: list[object] = []
    for now in LATER:
        with located_view([path], now) as view:
            for scope, budget in BUDGETS:
                blocks.append(prompt_of(view.records, scope, budget, view.lines()))
            live = {r.id: view.line(r) for r in view.records}
            alive = [live.get(rid) for rid in IDS]
            bad = [(b.line, b.reason) for b in view.scan.bad]
            blocks.append((alive, bad, view.scan.headerless, list(view.lines())))
    newest: dict[str, int] = {}
    for chunk in read_chunks(path):
        for raw in chunk.lines:
            rec = classify(raw)
            if type(rec) is Record:
                newest[rec.id] = max(rec.ts, newest.get(rec.id, rec.ts))
    blocks.append([newest.get(rid) for rid in IDS])
    return tuple(blocks)


def quick_answers(path: Path, store: ViewStore) -> tuple[object, ...] | None:
    """The same from the quick part, when it is valid for the file (None else)."""
    fd = open_for_reading(path)
    try:
        state = store.state
        quick = open_quick(state.view_ranks(path), state.view_seen(path), path, fd, str(path), None)
        if quick is None:
            return None
        blocks: list[object] = []
        try:
            for now in LATER:
                for scope, budget in BUDGETS:
                    blocks.append(quick.prompt(scope, budget, now))
                alive = [quick.alive(rid, now) for rid in IDS]
                lines = [None if r is None else quick.line(r) for r in alive]
                bad = [(b.line, b.reason) for b in quick.bad]
                shown = quick.shown(now)  # what `show --json` prints, in its order
                live = None if shown is None else list(lines_at(shown, [path], [fd]))
                blocks.append((lines, bad, quick.headerless, live))
            newest = []  # what `forget` stamps after: the store's, then what was appended
            for rid in IDS:
                found = [r.ts for r in quick.by_id.get(rid, ())]
                stored = quick.newest_stored(rid)
                found += [] if stored is None else [stored]
                newest.append(max(found) if found else None)
            blocks.append(newest)
        except Damaged:
            return None
        return tuple(blocks)
    finally:
        os.close(fd)


class RanksMachine(RuleBasedStateMachine):
    """Random appends (entries, soups of odd lines, torn lines), edits in place,
    truncations and damage to the quick part; before each fold, the quick part (with what
    was appended since) answers as a fresh fold does."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="viewranks-"))
        self.path = self.dir / "me.jsonl"
        self.path.write_bytes(HEADER + b"\n")
        self.store = ViewStore(StateDir(self.dir / "state"), min_bytes=0, save_after=0)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)

    @rule(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 3, 40, 400]))
    def append_entries(self, seed: int, n: int) -> None:
        self._append(b"".join(line + b"\n" for line in entries(seed, n)))

    @rule(lines=line_soups(4), cut=st.integers(0, 40))
    def append_soup(self, lines: list[bytes], cut: int) -> None:
        data = b"".join(line + b"\n" for line in lines)
        self._append(data[: max(1, len(data) - cut)])

    @rule()
    def fold(self) -> None:
        """A command that folds the file and writes the store and its quick part."""
        with contextlib.suppress(UnsupportedFormat):  # (an edit made the header another's)
            located_view([self.path], NOW, self.store).close()

    @rule(where=st.floats(0, 1), byte=st.integers(0x20, 0x7E))
    def edit_in_place(self, where: float, byte: int) -> None:
        size = self.path.stat().st_size
        if not size:
            return
        at = min(size - 1, int(where * size))
        with open(self.path, "r+b") as f:
            f.seek(at)
            if f.read(1) == b"\n":
                return
            f.seek(at)
            f.write(bytes([byte]))

    @rule(where=st.floats(0, 1))
    def truncate(self, where: float) -> None:
        os.truncate(self.path, int(where * self.path.stat().st_size))

    @rule(where=st.floats(0, 1), how=st.sampled_from(["flip", "cut"]))
    def damage(self, where: float, how: str) -> None:
        target = self.store.state.view_ranks(self.path)
        if not target.exists():
            return
        data = bytearray(target.read_bytes())
        if not data:
            return
        at = min(len(data) - 1, int(where * len(data)))
        if how == "flip":
            data[at] ^= 0x40
        else:
            del data[at:]
        target.write_bytes(bytes(data))

    @invariant()
    def same_as_a_fresh_fold(self) -> None:
        try:
            expected = fold_answers(self.path)
        except UnsupportedFormat:  # (a header of another format appended: rule 2)
            return
        quick = quick_answers(self.path, self.store)
        if quick is not None:
            assert quick == expected


RanksMachine.TestCase.settings = settings(
    max_examples=examples(0.3), stateful_step_count=15, deadline=None
)
test_the_quick_part_answers_as_a_fresh_fold = pytest.mark.slow(RanksMachine.TestCase)


def test_every_id_is_found_through_the_fence(tmp_path: Path) -> None:
    """Ids over several stretches of `FENCE` rows (of other lengths, so their byte order
    is not their number's): each is found with its instant, and no absent id is (before
    the first, after the last, between two, at a stretch's edge)."""
    ids = [f"id{n}" for n in range(2 * FENCE + 37)] + ["\u00e9t\u00e9", "z" * 40]
    lines = [
        json.dumps({"id": rid, "kind": "fact", "text": "t", "created_at": format_ts(T0 + n * MS)})
        for n, rid in enumerate(ids)
    ]
    path = tmp_path / "me.jsonl"
    path.write_bytes(HEADER + b"\n" + "".join(line + "\n" for line in lines).encode())
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    located_view([path], NOW, store).close()
    fd = open_for_reading(path)
    try:
        state = store.state
        quick = open_quick(state.view_ranks(path), state.view_seen(path), path, fd, str(path), None)
        assert quick is not None
        for n, rid in enumerate(ids):
            assert quick.newest_stored(rid) == T0 + n * MS, rid
        edges = sorted(ids)[FENCE - 1 : FENCE + 1]
        absent = ["", "a", "id", "id1 ", *(e + "0" for e in edges), "\U0010ffff"]
        for rid in absent:
            assert rid in ids or quick.newest_stored(rid) is None, rid
    finally:
        os.close(fd)


def test_a_damaged_quick_part_is_removed_and_written_again(tmp_path: Path) -> None:
    """A quick part whose columns are damaged gives no answer (the fold answers), is
    removed, and the next fold writes it again, though the store itself is not behind."""
    path = tmp_path / "me.jsonl"
    path.write_bytes(HEADER + b"\n" + b"".join(line + b"\n" for line in entries(7, 300)))
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    located_view([path], NOW, store).close()
    target = store.state.view_ranks(path)
    with located_view([path], NOW) as view:
        expected = prompt_of(view.records, None, 1500, view.lines())
    assert stored_prompt(store, path, None, 1500, NOW) == (expected, [], [])
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x40  # the last column's last block
    data[-9] ^= 0x40
    target.write_bytes(bytes(data))
    assert stored_prompt(store, path, None, 1500, NOW) is None
    assert not target.exists()
    located_view([path], NOW, store).close()
    assert stored_prompt(store, path, None, 1500, NOW) == (expected, [], [])
