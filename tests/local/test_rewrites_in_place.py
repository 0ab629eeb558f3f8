"""Files rewritten in place under the persistent merge index, and the index against the
plain merge (issue 24, item 19 (a) and (b)).

A cursor (`memsync.local.fileindex.cursor_valid`) lets a reader resume where it stopped
only if the file still holds what was read: the same inode, not shorter, and the same
bytes just before the offset. A file rewritten in place (`cp other me.jsonl`, an editor
saving over it: same inode, as long or longer) passes the first two checks; only the tail
check sees it. Each test here fails when that check is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

from memsync.local.merge import merge_files, merge_indexed
from memsync.local.reading import view_of
from memsync.local.statedir import StateDir

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}'
NOW = 1_796_000_000_000_000  # 2026-11-30, after every record here


def entry(rid: str, created_at: str, text: str, **extra: object) -> bytes:
    obj = {"id": rid, "kind": "fact", "text": text, "created_at": created_at, **extra}
    return json.dumps(obj).encode()


def write(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"".join(raw + b"\n" for raw in (HEADER, *lines)))
    return path


def rewrite_in_place(path: Path, *lines: bytes) -> None:
    """New content at the same inode (as `cp` over an existing file does), not shorter."""
    ino, size = path.stat().st_ino, path.stat().st_size
    data = b"".join(raw + b"\n" for raw in (HEADER, *lines))
    assert len(data) >= size
    with path.open("r+b") as f:
        f.write(data)
        f.truncate()
    assert path.stat().st_ino == ino


def ids(path: Path) -> set[str]:
    return {r.id for r in view_of([path], NOW).records}


B = entry("bbbbbbbbbbbb", "2026-11-02T00:00:00Z", "b, the source's first content")
C = entry("cccccccccccc", "2026-11-03T00:00:00Z", "c, written over b in place")
D = entry("dddddddddddd", "2026-11-04T00:00:00Z", "d, after c")
X = entry("xxxxxxxxxxxx", "2026-11-05T00:00:00Z", "x, the destination's first content")


def test_a_source_rewritten_in_place_is_merged_again(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    src, dest = write(tmp_path / "src.jsonl", B), write(tmp_path / "dest.jsonl")
    assert merge_indexed(dest, [src], state, now=NOW).appended == 1
    rewrite_in_place(src, C, D)
    merge_indexed(dest, [src], state, now=NOW)
    assert ids(dest) == {"bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"}


def test_a_destination_rewritten_in_place_is_indexed_again(tmp_path: Path) -> None:
    """The index of a destination rewritten in place must not answer for its old lines:
    a record it no longer holds is appended again, never taken as present."""
    state = StateDir(tmp_path / "state")
    src, dest = write(tmp_path / "src.jsonl", X), write(tmp_path / "dest.jsonl", X)
    assert merge_indexed(dest, [src], state, now=NOW).appended == 0  # the index is built
    rewrite_in_place(dest, C, D)  # x is gone from it
    write(src, X, B)  # the source grows (a new line past its cursor)
    merge_indexed(dest, [src], state, now=NOW)
    assert ids(dest) == {"xxxxxxxxxxxx", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"}


# --- (b) the index and the plain merge append the same bytes ----------------------------

# A superseding entry beaten in its own id travels only while the file does not record its
# supersession yet (rule 14; rule 10): here the file records it (P), so nothing travels.
P = entry("pppppppppppp", "2026-11-02T00:00:00Z", "p supersedes t", supersedes="tttttttttttt")
LATEST = entry("ssssssssssss", "2026-11-04T00:00:00Z", "s, its current version")
BEATEN = entry(
    "ssssssssssss", "2026-11-03T00:00:00Z", "s, older, supersedes t", supersedes="tttttttttttt"
)
OTHER = entry("oooooooooooo", "2026-11-01T00:00:00Z", "an unrelated entry")


def _both(tmp_path: Path, name: str, dest_lines: list[bytes], src_lines: list[bytes]) -> None:
    out = {}
    for how in ("plain", "indexed"):
        folder = tmp_path / f"{name}-{how}"
        folder.mkdir()
        dest = write(folder / "dest.jsonl", *dest_lines)
        src = write(folder / "src.jsonl", *src_lines)
        if how == "plain":
            result = merge_files(dest, [src], now=NOW)
        else:
            result = merge_indexed(dest, [src], StateDir(folder / "state"), now=NOW)
        out[how] = (result.appended, dest.read_bytes())
    assert out["indexed"] == out["plain"], name
    assert out["plain"][0] == 0, name  # beaten, its supersession known: nothing travels


def test_indexed_and_plain_merges_append_the_same_bytes_around_a_header(tmp_path: Path) -> None:
    """The destination's first chunk holds its header, a line the index reads one by one:
    the supersession in that chunk must be indexed too, or the indexed merge appends a
    record the plain merge calls beaten (179 bytes against 0). Same inputs, same bytes."""
    _both(tmp_path, "simple", [LATEST, P], [BEATEN])


def test_indexed_and_plain_merges_agree_whatever_else_the_first_chunk_holds(
    tmp_path: Path,
) -> None:
    """The same with the supersession before or after other lines, beside a bad line or a
    second header, in the destination's first chunk."""
    bad = b'{"id": "broken'
    shapes = {
        "first": [P, LATEST],
        "others": [OTHER, LATEST, OTHER.replace(b"oooo", b"qqqq"), P],
        "bad line": [bad, P, LATEST],
        "second header": [LATEST, HEADER, P],
    }
    for name, dest_lines in shapes.items():
        _both(tmp_path, name, dest_lines, [BEATEN])
