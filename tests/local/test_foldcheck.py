"""The check of a persistent view against its memory file (`memsync.local.foldcheck`,
issue 20): a command on a file unchanged since the last check reads none of the bytes the
view folded (a note vouches for the file's exact status), and every change to the file
still makes the next command read them and answer as a fold of the whole file does.

"Reads none of the bytes" is measured with Linux's per-process I/O counter (`rchar` in
`/proc/self/io`: every byte `read` and `pread` returned); those tests are skipped where
there is none. The answers are compared with a fold without a store everywhere."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memsync.local.foldcheck import MIN_BYTES, carry, digest, verified
from memsync.local.located import located_view
from memsync.local.memory import Memory
from memsync.local.statedir import StateDir
from memsync.local.storedreads import stored_prompt
from memsync.local.viewstore import ViewStore
from tests.helpers.strategies import HEADER, NOW

IO = Path("/proc/self/io")
counted = pytest.mark.skipif(not IO.exists(), reason="no /proc/self/io to count bytes read")

OLD = 0.08
"""Seconds to let a file's change time age past the check's racy margin (50 ms)."""


def _line(i: int, text: str = "entry") -> bytes:
    return (
        b'{"id": "id%06d", "kind": "fact", "text": "%s %d %s", "created_at": '
        b'"2026-11-01T00:%02d:%02dZ"}\n' % (i, text.encode(), i, b"x" * 250, (i // 60) % 60, i % 60)
    )


def _memory(tmp_path: Path) -> tuple[Path, ViewStore]:
    """A memory file of 1 MB (over `MIN_BYTES`, so that `add` carries its note) in long
    lines (its store is much smaller than it), with an empty store; appends re-save the
    store only after `SAVE_AFTER_BYTES` (each save reads the folded bytes again)."""
    path = tmp_path / "me.jsonl"
    body = b"".join(_line(i) for i in range(3000))
    path.write_bytes(HEADER + b"\n" + body)
    assert path.stat().st_size > MIN_BYTES
    return path, ViewStore(StateDir(tmp_path / "state"))


def _answers(path: Path, store: ViewStore | None) -> tuple[list[str], str]:
    with located_view([path], NOW, store) as view:
        ids = [r.id for r in view.records]
    if store is None:
        return ids, stored_prompt(path, ViewStore(StateDir(path.parent / "bare")), None, 2000)
    return ids, stored_prompt(path, store, None, 2000, now=NOW)


def _bytes_read() -> int:
    for line in IO.read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _reading(path: Path, store: ViewStore) -> tuple[int, tuple[list[str], str]]:
    """How many bytes a prompt of `path` from its store read (the block's lines, not the
    folded bytes when the note vouches for them; a whole view reads every live line), and
    the answers of a view and a prompt."""
    before = _bytes_read()
    stored_prompt(path, store, None, 2000, now=NOW)
    read = _bytes_read() - before
    return read, _answers(path, store)


def _warm(path: Path, store: ViewStore) -> None:
    """Let the file age, then build its store and leave the check's note."""
    time.sleep(OLD)
    _answers(path, store)
    assert store.state.view_seen(path).exists()


@counted
def test_a_second_command_on_an_unchanged_file_reads_none_of_its_folded_bytes(
    tmp_path: Path,
) -> None:
    path, store = _memory(tmp_path)
    _warm(path, store)
    read, answers = _reading(path, store)
    assert read < path.stat().st_size // 2  # the block's lines, a fifth of the file
    assert answers == _answers(path, None)


@pytest.mark.parametrize("then_append", [False, True], ids=["same size", "then an append"])
def test_an_edit_in_place_after_the_note_is_noticed(tmp_path: Path, then_append: bool) -> None:
    path, store = _memory(tmp_path)
    _warm(path, store)
    data = bytearray(path.read_bytes())
    at = data.index(b"id000500")
    data[at : at + 2] = b"zz"  # same length, the same inode, in the middle
    with open(path, "r+b") as f:
        f.write(bytes(data))
    if then_append:
        with open(path, "ab") as f:
            f.write(_line(999_999, "late"))
    assert _answers(path, store) == _answers(path, None)
    assert "zz000500" in _answers(path, store)[0]


def test_a_file_changed_just_now_gets_no_note(tmp_path: Path) -> None:
    """Within a tick of a coarse filesystem clock, a second write could keep the status
    the note was left for ("racy git"): a file changed this recently is not vouched for."""
    path, store = _memory(tmp_path)
    note = store.state.prepared(store.state.view_seen(path))
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        assert verified(note, path, fd, st, st.st_size, digest(fd, st.st_size))
        assert not note.exists()
        time.sleep(OLD)
        assert verified(note, path, fd, st, st.st_size, digest(fd, st.st_size))
        assert note.exists()
        assert not verified(note, path, fd, st, st.st_size, b"another digest..")
    finally:
        os.close(fd)


@counted
def test_add_carries_the_note_so_the_next_command_reads_no_folded_byte(tmp_path: Path) -> None:
    path, store = _memory(tmp_path)
    _warm(path, store)
    rid = Memory(path, state_dir=store.state).add("fact", "carried across the append").id
    read, answers = _reading(path, store)
    assert read < path.stat().st_size // 2  # the block's lines, a fifth of the file
    assert answers == _answers(path, None)
    assert rid in answers[0]


@counted
def test_an_append_by_another_writer_in_between_is_not_carried(tmp_path: Path) -> None:
    path, store = _memory(tmp_path)
    _warm(path, store)
    note = store.state.view_seen(path)
    before = os.stat(path)
    ours, theirs = _line(900_001, "ours"), _line(900_002, "theirs")
    with open(path, "ab") as f:
        f.write(theirs)  # a lock-free writer, between our status and our append
        f.write(ours)
    carry(note, before, os.stat(path), len(ours))
    read, answers = _reading(path, store)
    assert read >= MIN_BYTES  # the folded bytes were read again
    assert answers == _answers(path, None)


@counted
def test_a_damaged_note_is_read_past(tmp_path: Path) -> None:
    path, store = _memory(tmp_path)
    _warm(path, store)
    note = store.state.view_seen(path)
    note.write_bytes(note.read_bytes()[:-3] + b"999")
    read, answers = _reading(path, store)
    assert read >= MIN_BYTES
    assert answers == _answers(path, None)


@counted
def test_forget_through_a_memory_uses_the_store_of_its_own_state_directory(
    tmp_path: Path,
) -> None:
    """`Memory(state_dir=...)` stamps a tombstone after the id's newest record, found in
    the persistent view of its own state directory (not the command line's default)."""
    path, store = _memory(tmp_path)
    _warm(path, store)
    before = _bytes_read()
    Memory(path, state_dir=store.state).forget("id000500")
    assert _bytes_read() - before < path.stat().st_size // 2
    assert "id000500" not in _answers(path, None)[0]
    assert _answers(path, store) == _answers(path, None)
