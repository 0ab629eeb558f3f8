"""A change a sampled digest did not notice (issue 20): a same-length edit in place (an
editor that truncates and rewrites the same inode, as nano and VS Code save) between the
blocks a digest of head, tail and 16 samples reads, in a file larger than 128 KiB, then an
append before the next command. With that digest the store was used and answered for
bytes that were no longer there; the store's digest now covers every folded byte. The
edited line is chosen outside those old samples, so the test keeps its point."""

from __future__ import annotations

from pathlib import Path

from memsync.local.located import located_view
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
from tests.helpers.strategies import HEADER, NOW


def _ids(path: Path, store: ViewStore | None) -> list[str]:
    with located_view([path], NOW, store) as view:
        return [r.id for r in view.records]


def _unsampled(size: int, lines: list[tuple[int, int]]) -> int:
    """The start of a line none of whose bytes a sampled digest read (64 KiB of head and
    of tail, 16 blocks of 4 KiB between)."""
    head, tail, n, block = 65536, 65536, 16, 4096
    spans = [(0, head), (size - tail, size)]
    spans += [(size * i // n, size * i // n + block) for i in range(1, n)]
    for start, end in lines:
        if all(end <= a or start >= b for a, b in spans):
            return start
    raise AssertionError("no unsampled line")


def test_an_in_place_edit_then_an_append_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    body = [
        b'{"id": "id%06d", "kind": "fact", "text": "entry %d", "created_at": '
        b'"2026-11-01T00:%02d:%02dZ"}' % (i, i, (i // 60) % 60, i % 60)
        for i in range(4000)
    ]
    data = HEADER + b"\n" + b"".join(line + b"\n" for line in body)
    path.write_bytes(data)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=0)
    assert _ids(path, store) == _ids(path, None)  # the store is written
    starts, at = [], len(HEADER) + 1
    for line in body:
        starts.append((at, at + len(line) + 1))
        at += len(line) + 1
    start = _unsampled(len(data), starts)
    edited = bytearray(data)
    edited[start + 8 : start + 10] = b"zz"  # "id00...." -> "zz00....": same length
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(bytes(edited))
    with open(path, "ab") as f:
        f.write(
            b'{"id": "new", "kind": "fact", "text": "t", "created_at": "2026-11-01T01:00:00Z"}\n'
        )
    assert _ids(path, store) == _ids(path, None)
