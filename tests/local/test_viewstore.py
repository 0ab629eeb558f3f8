"""The persistent view (`memsync.local.viewstore`, issue 20): the same answers as a fold of
the whole file, whatever happened to the file or to the store since it was written."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memsync.core.digest import ViewDigest, record_hash, view_digest
from memsync.core.records import Described
from memsync.core.timestamps import parse_ts
from memsync.core.view import selector
from memsync.errors import UnknownId, UnsupportedFormat
from memsync.local.compaction import compact_file
from memsync.local.fulltext import fts5_available, recall
from memsync.local.located import LocatedView, located_view
from memsync.local.memory import Memory
from memsync.local.reading import prompt_of, prompt_of_described
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import MIN_BYTES, ViewStore
from tests.helpers.examples import examples
from tests.helpers.strategies import HEADER, NOW, line_soups

Answer = tuple[object, ...] | str


def answer(path: Path, store: ViewStore | None) -> Answer:
    """What a reader of the view gets: the live lines in order, their ids, how many bad
    lines, and the files without a header; or the error it gets (a header of another
    format after an edit, rule 2)."""
    try:
        with located_view([path], NOW, store) as view:
            lines = list(view.lines())
            found = (lines, [r.id for r in view.records], len(view.scan.bad), view.scan.headerless)
            return (*found, *_selections(view))
    except UnsupportedFormat as exc:
        return str(exc)


def _selections(view: LocatedView) -> tuple[object, ...]:
    """The prompt blocks and `show --scope --kind` selection, as the commands make them:
    from what the persistent view knows of each entry when it was used (issue 20)."""
    blocks = []
    for scope, budget in (("github.com", 3), (None, 6), (None, 420), (None, 2000)):
        if view.resumed:
            blocks.append(prompt_of_described(view.records, scope, budget, view.line, view.length))
        else:
            blocks.append(prompt_of(view.records, scope, budget, view.lines()))
    keep = selector(scope="project:x", kinds=["fact", "lesson"])
    assert keep is not None
    described = [
        r
        for r in view.records
        if type(r) is not Described or keep({"kind": r.kind, "scope": r.scope})
    ]
    shown = [raw for raw in view.lines_of(described) if keep(msgspec.json.decode(raw))]
    return (*blocks, shown)


def resumes(store: ViewStore, path: Path) -> bool:
    fd = open_for_reading(path)
    try:
        return store.resume(path, fd, str(path)) is not None
    finally:
        os.close(fd)


class StoreMachine(RuleBasedStateMachine):
    """Random appends (good, bad, torn lines), edits in place, truncations, compactions
    (a new inode), replaces by and copies from another file, and damage to the store;
    after each step the view through the store equals a fresh fold of the same bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="viewstore-"))
        self.path = self.dir / "me.jsonl"
        self.path.write_bytes(HEADER + b"\n")
        self.store = ViewStore(StateDir(self.dir / "state"), min_bytes=0, save_after=0)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(lines=line_soups(6))
    def append(self, lines: list[bytes]) -> None:
        with open(self.path, "ab") as f:
            f.write(b"".join(line + b"\n" for line in lines))

    @rule(lines=line_soups(2), cut=st.integers(1, 40))
    def append_torn(self, lines: list[bytes], cut: int) -> None:
        data = b"".join(line + b"\n" for line in lines)
        with open(self.path, "ab") as f:
            f.write(data[: max(1, len(data) - cut)])

    @rule(where=st.floats(0, 1), byte=st.integers(0x20, 0x7E))
    def edit_in_place(self, where: float, byte: int) -> None:
        size = self.path.stat().st_size
        if not size:
            return
        at = min(size - 1, int(where * size))
        with open(self.path, "r+b") as f:
            f.seek(at)
            old = f.read(1)
            if old in (b"\n", bytes([byte])):
                return
            f.seek(at)
            f.write(bytes([byte]))

    @rule(where=st.floats(0, 1))
    def truncate(self, where: float) -> None:
        size = self.path.stat().st_size
        os.truncate(self.path, int(where * size))

    @rule(keep=st.integers(0, 5))
    def compact(self, keep: int) -> None:
        """A rewrite as compaction does it: a temp file renamed over (another inode)."""
        lines = self.path.read_bytes().split(b"\n")
        tmp = self.dir / ".me.jsonl.tmp"
        tmp.write_bytes(b"\n".join(lines[: 1 + keep] + lines[-2:]))
        os.replace(tmp, self.path)

    @rule(lines=line_soups(8), copy=st.booleans())
    def replace_by_other(self, lines: list[bytes], copy: bool) -> None:
        """Another file put in its place: renamed over it, or copied into it (same inode:
        a restore from a backup, a copy from another machine)."""
        other = self.dir / "other.jsonl"
        other.write_bytes(HEADER + b"\n" + b"".join(line + b"\n" for line in lines))
        if copy:
            shutil.copyfile(other, self.path)
        else:
            os.replace(other, self.path)

    @rule(where=st.floats(0, 1), how=st.sampled_from(["flip", "cut", "empty", "other"]))
    def damage_store(self, where: float, how: str) -> None:
        target = self.store.state.view_store(self.path)
        if not target.exists():
            return
        data = bytearray(target.read_bytes())
        if not data:
            return  # emptied by an earlier damage: nothing left to damage
        at = min(len(data) - 1, int(where * len(data)))
        if how == "flip":
            data[at] ^= 0x40
        elif how == "cut":
            del data[at:]
        elif how == "empty":
            data = bytearray()
        else:  # the store of another file, under this file's name
            other = self.dir / "elsewhere.jsonl"
            shutil.copyfile(self.path, other)
            answer(other, self.store)
            theirs = self.store.state.view_store(other)
            if not theirs.exists():  # a file of another format has no view
                return
            data = bytearray(theirs.read_bytes())
        target.write_bytes(bytes(data))

    @invariant()
    def same_as_a_fresh_fold(self) -> None:
        assert answer(self.path, self.store) == answer(self.path, None)


StoreMachine.TestCase.settings = settings(
    max_examples=examples(0.3), stateful_step_count=12, deadline=None
)
test_the_store_answers_as_a_fresh_fold = StoreMachine.TestCase


def _file(tmp_path: Path, n: int, name: str = "me.jsonl") -> Path:
    path = tmp_path / name
    body = b"".join(
        b'{"id": "id%06d", "kind": "fact", "text": "entry %d", "created_at": '
        b'"2026-11-01T00:%02d:%02dZ"}\n' % (i, i, (i // 60) % 60, i % 60)
        for i in range(n)
    )
    path.write_bytes(HEADER + b"\n" + body)
    return path


def test_a_grown_file_is_folded_from_where_the_store_stopped(tmp_path: Path) -> None:
    path = _file(tmp_path, 200)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(path, store)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(
            b'{"id": "new", "kind": "fact", "text": "t", "created_at": "2026-11-01T01:00:00Z"}\n'
        )
    fd = open_for_reading(path)
    try:
        resumed = store.resume(path, fd, str(path))
    finally:
        os.close(fd)
    assert resumed is not None
    assert resumed.offset == size
    assert answer(path, store) == answer(path, None)
    found = answer(path, store)
    assert not isinstance(found, str)
    assert "new" in cast(list[str], found[1])


def test_a_damaged_store_is_not_used(tmp_path: Path) -> None:
    path = _file(tmp_path, 200)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(path, store)
    assert resumes(store, path)
    target = store.state.view_store(path)
    good = target.read_bytes()
    for bad in (
        good[:-1],
        good[: len(good) // 2],
        b"",
        good[:40] + bytes([good[40] ^ 1]) + good[41:],
    ):
        target.write_bytes(bad)
        assert not resumes(store, path)
        assert answer(path, store) == answer(path, None)


def test_a_store_of_another_version_is_not_used(tmp_path: Path) -> None:
    path = _file(tmp_path, 50)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(path, store)
    target = store.state.view_store(path)
    data = target.read_bytes()
    # The format string is inside the checksummed payload: a store written by another
    # version is whole and consistent, and still not used.
    from memsync.local import viewstore

    stored = viewstore._unpack(data)
    assert stored is not None
    stored.format = "memsync-view/1 0.0.0-other"
    target.write_bytes(viewstore._pack(stored))
    assert not resumes(store, path)


def test_a_store_of_another_file_is_not_used(tmp_path: Path) -> None:
    """Two files with the same bytes (a copy): the store of one is not the other's, even
    put under its name; nor is it once the copy is moved to where the first file was."""
    a = _file(tmp_path, 100, "a.jsonl")
    b = tmp_path / "b.jsonl"
    shutil.copyfile(a, b)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    answer(a, store)
    store.state.prepared(store.state.view_store(b)).write_bytes(
        store.state.view_store(a).read_bytes()
    )
    assert not resumes(store, b)
    os.replace(b, a)  # same path, same bytes, another inode
    assert not resumes(store, a)
    assert answer(a, store) == answer(a, None)


def test_a_full_disk_leaves_the_answer_right(tmp_path: Path) -> None:
    """A store that cannot be written (here: its folder is a file) is bypassed."""
    path = _file(tmp_path, 50)
    state = tmp_path / "state"
    state.write_bytes(b"not a folder")
    store = ViewStore(StateDir(state), min_bytes=0)
    assert answer(path, store) == answer(path, None)


_WRITER = """
import sys
from pathlib import Path
from memsync.core.records import Described
from memsync.core.view import selector
from memsync.local.compaction import compact_file
from memsync.local.fulltext import fts5_available, recall
from memsync.local.located import LocatedView, located_view
from memsync.local.memory import Memory
from memsync.local.reading import prompt_of, prompt_of_described
from memsync.local.statedir import StateDir
from memsync.local.viewstore import MIN_BYTES, ViewStore
path, state = Path(sys.argv[1]), StateDir(Path(sys.argv[2]))
store = ViewStore(state, min_bytes=0, save_after=0)
print("ready", flush=True)
n = 0
while True:
    with open(path, "ab") as f:
        f.write(b'{"id": "k%d", "kind": "fact", "text": "t", "created_at": "2026-11-01T02:00:00Z"}\\n' % n)
    n += 1
    with located_view([path], None, store) as view:
        pass
"""


@pytest.mark.slow
def test_kill_9_while_the_store_is_written(tmp_path: Path) -> None:
    """A process killed at any moment of writing its store: the next reader answers right
    (the old store, the new one, or none; never half of one)."""
    path = _file(tmp_path, 3000)
    state = tmp_path / "state"
    for delay in (0.05, 0.2, 0.35, 0.5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(state)], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store = ViewStore(StateDir(state), min_bytes=0)
        assert answer(path, store) == answer(path, None)
    target = StateDir(state).view_store(path)
    assert target.exists()
    # The temporary files of killed writers are removed by the next store written (one
    # is made here: a kill does not always fall in the write).
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (target.parent / f".{target.name}.tmp-{int(dead.stdout)}").write_bytes(b"half")
    with open(path, "ab") as f:
        f.write(
            b'{"id": "last", "kind": "fact", "text": "t", "created_at": "2026-11-01T04:00:00Z"}\n'
        )
    store = ViewStore(StateDir(state), min_bytes=0, save_after=0)
    answer(path, store)
    names = {p.name for p in target.parent.iterdir()}
    kept = {target.name, store.state.view_ranks(path).name}
    # No temporary file left; the check's note (`foldcheck`) when the file was old enough.
    assert kept <= names <= kept | {store.state.view_seen(path).name}


_READER = """
import sys
from pathlib import Path
from memsync.core.digest import view_digest
from memsync.local.located import located_view
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
path, state = Path(sys.argv[1]), StateDir(Path(sys.argv[2]))
store = ViewStore(state, min_bytes=0, save_after=0)
for _ in range(15):
    with located_view([path], 0, store) as view:
        print(view_digest(view.lines()), flush=True)
"""


@pytest.mark.slow
def test_concurrent_readers_and_an_appender_never_see_a_wrong_view(tmp_path: Path) -> None:
    """Four processes read (and write the store) while lines are appended: each view each
    of them gets is the view of the file as it was after some number of appends."""
    path = _file(tmp_path, 1000)
    state = tmp_path / "state"
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, str(path), str(state)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    appended = 0
    # Appends go on for as long as any reader reads (a loaded machine may start them late:
    # a fixed count could all land before the first view), up to a bound.
    while any(r.poll() is None for r in readers) and appended < 20_000:
        with open(path, "ab") as f:
            f.write(
                b'{"id": "late%d", "kind": "fact", "text": "t", "created_at": '
                b'"2026-11-01T03:00:00Z"}\n' % appended
            )
        appended += 1
        time.sleep(0.002)
    seen = set()
    for r in readers:
        out, _ = r.communicate(timeout=120)
        assert r.returncode == 0
        seen |= set(out.splitlines())
    # Each appended line is a new entry: the view after k appends is the first view and k
    # more entries, and its digest that of the first view plus theirs (a sum, issue 20).
    lines = path.read_bytes().split(b"\n")[:-1]
    base = len(lines) - appended
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_bytes(b"\n".join(lines[:base]) + b"\n")
    with located_view([prefix], 0) as view:
        first = view_digest(view.lines())
    valid = {str(first)}
    total = first.value
    for k in range(appended):
        total = (total + record_hash(lines[base + k])) % (1 << 64)
        valid.add(str(ViewDigest(total, first.entries + k + 1)))
    assert seen
    assert seen <= valid
    assert len(seen) > 1  # the readers did see the file grow


@pytest.mark.slow
def test_recall_through_the_store_answers_as_through_the_cache(tmp_path: Path) -> None:
    """`recall(persistent=True)` (the command line's) finds what the cached view finds,
    cold, after appends, forgets and supersessions folded past the store, and after a
    compaction replaced the file."""
    if not fts5_available():
        pytest.skip("no FTS5 in this SQLite")
    path = tmp_path / "me.jsonl"
    words = ("retry", "mirror", "deploy", "cache", "zebra")
    body = b"".join(
        b'{"id": "r%05d", "kind": "%s", "text": "%s and %s number %d", "confidence": 0.%d, '
        b'"created_at": "2026-11-01T%02d:%02d:00Z"}\n'
        % (
            i,
            (b"fact", b"lesson")[i % 2],
            words[i % 5].encode(),
            words[i * 7 % 5].encode(),
            i,
            i % 9 + 1,
            i // 60 % 24,
            i % 60,
        )
        for i in range(3000)
    )
    path.write_bytes(HEADER + b"\n" + body)
    assert path.stat().st_size > MIN_BYTES
    state = tmp_path / "state"

    def same() -> None:
        for query, kinds in (("retry", ()), ("zebra mirror", ("lesson",)), ("deploy", ())):
            through_store = recall(
                path, query, kinds=kinds, limit=15, state_dir=state, persistent=True
            )
            assert through_store == recall(path, query, kinds=kinds, limit=15, state_dir=state)
            assert through_store

    same()
    assert StateDir(state).view_store(path).exists()
    assert StateDir(state).view_ranks(path).exists()  # what answers after the appends below
    mem = Memory.open(path)
    hits = recall(path, "retry", limit=5, state_dir=state, persistent=True)
    mem.forget(hits[0].id)
    mem.supersede(hits[1].id, "retry the zebra now", kind="fact")
    mem.add("lesson", "zebra retry mirror deploy")
    same()
    compact_file(path, quiet_seconds=0, horizon_days=0, grace_seconds=0)
    same()


def test_stores_of_files_that_are_gone_are_swept(tmp_path: Path) -> None:
    """A store written without one before removes the stores of memory files that no
    longer exist, and those of another format; those of files still there stay."""
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    kept, gone, new = (
        _file(tmp_path, 20, name) for name in ("kept.jsonl", "gone.jsonl", "new.jsonl")
    )
    answer(kept, store)
    answer(gone, store)
    foreign = store.state.view_store(tmp_path / "old.jsonl")
    foreign.write_bytes(b"MSVIEW1\n" + bytes(40))
    for path in (kept, gone):  # the check's notes (`foldcheck`) go with their store
        store.state.view_seen(path).write_bytes(b"a note")
    gone.unlink()
    answer(new, store)
    names = {p.name for p in store.state.view_store(new).parent.iterdir()}
    stores = {store.state.view_store(p).name for p in (kept, new)}
    stores |= {store.state.view_ranks(p).name for p in (kept, new)}
    stores.add(store.state.view_seen(kept).name)
    assert stores <= names <= stores | {store.state.view_seen(new).name}


def test_forget_takes_the_ids_newest_record_from_the_store_and_what_was_appended_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`forget` stamps its tombstone after the id's newest record, taken from the file's
    persistent view (issue 20) and the lines appended since it, and refuses an id the file
    never held."""

    def us(text: str) -> int:
        value = parse_ts(text)
        assert value is not None
        return value

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    path = _file(tmp_path, 3000)
    assert path.stat().st_size > MIN_BYTES
    store = ViewStore(StateDir.of())
    answer(path, store)
    assert resumes(store, path)
    mem = Memory.open(path)
    with pytest.raises(UnknownId):
        mem.forget_record("never-here")
    # A newer record of id000002 appended after the store was written: the tombstone is
    # stamped after it, not after what the store holds.
    late = (
        b'{"id": "id000002", "kind": "fact", "text": "t", "created_at": "2026-11-03T00:00:00Z"}\n'
    )
    with open(path, "ab") as f:
        f.write(late)
    tomb = mem.forget_record("id000002", now=0)
    assert tomb.ts > us("2026-11-03T00:00:00Z")
    # An id only the store's part holds.
    assert mem.forget_record("id000010", now=0).ts > us("2026-11-01T00:00:10Z")
    # The store is what was read: one that says id000020's newest record is later than the
    # file's (a forged one, valid for the file) moves the stamp. (Without its quick part,
    # read first when there is one: `tests/local/test_viewranks.py`.)
    store.state.view_ranks(path).unlink()
    target = store.state.view_store(path)
    from memsync.local import viewstore

    blob = target.read_bytes()
    stored = viewstore._unpack(blob)
    assert stored is not None
    stored.inferred.ts[stored.inferred.ids.index("id000020")] = us("2027-01-01T00:00:00Z")
    target.write_bytes(viewstore._pack(stored))
    assert mem.forget_record("id000020", now=0).ts > us("2027-01-01T00:00:00Z")
