"""The record hashes the persistent view keeps (issue 21, cost proportional to change): the
view digest and a receipt's bucket digests summed from them are the ones hashing the live
lines gives, cold or warm, through appends, tombstones, supersessions and expiries (rules 8
to 11), and a warm view reads no line for them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memsync.local.located
from memsync.core.digest import digest_of, view_digest
from memsync.core.receipts import ViewSummary, summarize
from memsync.core.records import Described
from memsync.local import viewstore
from memsync.local.located import located_view
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import ViewStore
from tests.helpers.examples import examples
from tests.helpers.strategies import HEADER, instants, line_soups


def from_lines(path: Path, now: int) -> ViewSummary:
    """The summary as it was computed before the store kept hashes: every live line read
    and hashed (no store)."""
    with located_view([path], now) as view:
        lines = list(view.lines())
        summary = summarize(
            (rec.id, raw, rec.expires) for rec, raw in zip(view.records, lines, strict=True)
        )
        assert view_digest(lines).value == summary.digest
    return summary


def from_store(path: Path, store: ViewStore, now: int) -> tuple[ViewSummary, bool]:
    """The summary from the hashes the fold kept (`LocatedView.hashes`), and whether every
    live record came with its hash (no line read for the digest)."""
    with located_view([path], now, store, hashes=True) as view:
        summary = ViewSummary()
        for rec, h in zip(view.records, view.hashes(), strict=True):
            summary.add_hashed(rec.id, h, rec.expires)
        assert digest_of(view.hashes()).value == summary.digest
        return summary, all(rec.hash for rec in view.records)


@pytest.mark.slow
@settings(max_examples=examples(0.3), deadline=None)
@given(
    batches=st.lists(line_soups(8), min_size=1, max_size=5),
    nows=st.lists(instants(), min_size=1, max_size=3),
    parallel=st.booleans(),
)
def test_kept_hashes_sum_to_what_hashing_the_live_lines_gives(
    batches: list[list[bytes]], nows: list[int], parallel: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="viewdigest-") as tmp:
        root = Path(tmp)
        path = root / "me.jsonl"
        path.write_bytes(HEADER + b"\n")
        # Saved after every fold; saved once and then always behind (the versions folded
        # since are hashed by the fold, not read from the store).
        each = ViewStore(StateDir(root / "each"), min_bytes=0, save_after=0)
        behind = ViewStore(StateDir(root / "behind"), min_bytes=0, save_after=1 << 40)
        # Also written by views that hold no hashes (`show`, `prompt`): it keeps them.
        plain = ViewStore(StateDir(root / "plain"), min_bytes=0, save_after=0)
        for n, lines in enumerate(batches):
            with open(path, "ab") as f:
                f.write(b"".join(line + b"\n" for line in lines))
            for now in nows:
                want = from_lines(path, now)
                cold = ViewStore(StateDir(root / f"cold{n}-{now}"), min_bytes=0)
                # A cold fold, in two processes when `parallel` (the child's winners are
                # sent with their hashes).
                bytes_ = 1 if parallel else memsync.local.located.PARALLEL_BYTES
                with mock.patch.object(memsync.local.located, "PARALLEL_BYTES", bytes_):
                    got, _ = from_store(path, cold, now)
                assert got == want
                located_view([path], now, plain).close()
                for store in (each, behind, cold, plain):
                    got, all_kept = from_store(path, store, now)
                    assert got == want
                    assert all_kept  # the digest read no line


def test_a_store_without_the_hash_column_is_rebuilt(tmp_path: Path) -> None:
    """A store as the previous format wrote it (no hashes) is not used: the view is folded
    again, the store written anew, and the digest is right."""
    path = tmp_path / "me.jsonl"
    body = b"".join(
        b'{"id": "id%04d", "kind": "fact", "text": "entry %d", "created_at": '
        b'"2026-11-01T00:%02d:%02dZ"}\n' % (i, i, (i // 60) % 60, i % 60)
        for i in range(100)
    )
    path.write_bytes(HEADER + b"\n" + body)
    now = 1 << 62
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    from_store(path, store, now)
    target = store.state.view_store(path)
    stored = viewstore._unpack(target.read_bytes())
    assert stored is not None
    old = msgspec.msgpack.decode(msgspec.msgpack.encode(stored))
    old[0] = "memsync-view/3 " + stored.format.split(" ", 1)[1]
    for slot in old[11:14]:
        del slot[-1]  # the hash column
    payload = msgspec.msgpack.encode(old)
    target.write_bytes(viewstore._header(stored.path, payload) + payload)

    def resumes() -> bool:
        fd = open_for_reading(path)
        try:
            return store.resume(path, fd, str(path)) is not None
        finally:
            os.close(fd)

    assert not resumes()
    got, all_kept = from_store(path, store, now)
    assert got == from_lines(path, now)
    assert all_kept
    assert resumes()
    with located_view([path], now, store, hashes=True) as view:
        assert view.resumed
        assert all(type(r) is Described and r.hash for r in view.records)


def _columns(store: ViewStore, path: Path) -> list[list[int]]:
    """The hash columns (user, inferred versions) of `path`'s store, as integers."""
    stored = viewstore._unpack(store.state.view_store(path).read_bytes())
    assert stored is not None
    return [
        [int.from_bytes(s.hash[i : i + 8], "big") for i in range(0, len(s.hash), 8)]
        for s in (stored.user, stored.inferred)
    ]


def test_the_hash_column_is_filled_by_the_first_digest_and_kept(tmp_path: Path) -> None:
    """A plain view (`prompt`, `show`) hashes no line: its store holds 0 ("not known") for
    every version; the first digest hashes them, gives the right answer and saves them
    (with nothing appended since), so the next resumes with every hash; a version folded
    later by a plain view is again 0, and only it is hashed by the next digest."""
    path = tmp_path / "me.jsonl"
    body = b"".join(
        b'{"id": "id%02d", "kind": "fact", "text": "entry %d", "created_at": '
        b'"2026-11-01T00:00:%02dZ"%s}\n' % (i % 40, i, i % 60, b', "source": "user"' * (i % 3 == 0))
        for i in range(60)
    )
    path.write_bytes(
        HEADER + b"\n" + body + b'{"id": "id07", "deleted": true, '
        b'"created_at": "2026-11-01T00:01:00Z"}\n'
    )
    now = 1 << 62
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=0)
    located_view([path], now, store).close()
    user, inferred = _columns(store, path)
    assert user
    assert inferred
    assert set(user) == set(inferred) == {0}

    got, _ = from_store(path, store, now)
    assert got == from_lines(path, now)
    assert all(h for column in _columns(store, path) for h in column)
    fd = open_for_reading(path)
    try:
        resumed = store.resume(path, fd, str(path), hashes=True)
    finally:
        os.close(fd)
    assert resumed is not None
    versions = [*resumed.scan.index.user.values(), *resumed.scan.index.inferred.values()]
    assert all(type(r) is Described and r.hash for r in versions)

    with open(path, "ab") as f:
        f.write(
            b'{"id": "late", "kind": "fact", "text": "x", "created_at": "2026-11-02T00:00:00Z"}\n'
        )
    located_view([path], now, store).close()
    user, inferred = _columns(store, path)
    assert inferred[-1] == 0  # the late version: folded by a plain view
    assert all(inferred[:-1])
    assert all(user)
    got, _ = from_store(path, store, now)
    assert got == from_lines(path, now)
    assert all(h for column in _columns(store, path) for h in column)
