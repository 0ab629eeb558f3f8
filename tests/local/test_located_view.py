"""The two-pass view (`memsync.local.located`, issue 14): the same view as one built from
whole records, without holding the lines.

Pinned here: the lines read back are the view's lines, byte for byte and in order, on
files with every shape that moves offsets (CRLF lines, blank and bad lines, a line over
rule 4's limit in the middle of a read chunk, a torn last line, several files); ties of
rule 9 are settled on the lines read again; and a file replaced between the two passes
(a compaction) is still read as it was.
"""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import memsync.local.fold_halves
import memsync.local.forking
import memsync.local.located
from memsync.core.lines import MAX_LINE_BYTES
from memsync.core.records import Described, Located, Record
from memsync.core.timestamps import SECOND, format_ts
from memsync.errors import UnsupportedFormat
from memsync.local.fresh import header_line
from memsync.local.located import check_files, located_view
from memsync.local.reading import ScanResult, scan, view_of
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore

T0 = 1_767_225_600 * SECOND  # 2026-01-01T00:00:00Z
NOW = T0 + 400 * 86_400 * SECOND


def _lines(rng: random.Random, count: int) -> list[bytes]:
    """Versions, tombstones, supersessions, twins, CRLF, blank, bad and long lines."""
    out = []
    for n in range(count):
        rid = f"id{rng.randrange(count // 3 + 1)}"
        ts = format_ts(T0 + rng.randrange(1000) * SECOND)
        roll = rng.random()
        if roll < 0.1:
            obj: dict[str, object] = {"id": rid, "deleted": True, "created_at": ts}
        else:
            obj = {"id": rid, "kind": "fact", "text": f"{rid} v{n}", "created_at": ts}
            if roll < 0.3:
                obj["source"] = "user"
            if roll > 0.95:
                obj["supersedes"] = f"id{rng.randrange(count // 3 + 1)}"
        line = json.dumps(obj).encode()
        if roll < 0.05:
            line += b"\r"
        out.append(line)
        if roll > 0.97:
            out.append(b"{not json")
        elif roll > 0.96:
            out.append(b"")
        elif roll > 0.955:
            big = {"id": rid, "kind": "fact", "text": "x" * (MAX_LINE_BYTES + 10)}
            out.append(json.dumps({**big, "created_at": ts}).encode())
    return out


def _write(path: Path, lines: list[bytes], *, torn: bytes = b"") -> None:
    path.write_bytes(header_line(T0) + b"".join(line + b"\n" for line in lines) + torn)


def _in_two_processes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every view fold in two processes (`fold_halves`); the list counts the folds
    that did."""
    forks: list[int] = []
    real = memsync.local.fold_halves.fold_in_halves

    def counted(*args: Any) -> None:
        forks.append(1)
        real(*args)

    monkeypatch.setattr(memsync.local.located, "PARALLEL_BYTES", 1)
    monkeypatch.setattr(memsync.local.fold_halves, "fold_in_halves", counted)
    # The fold refuses to fork while another thread runs (a fork copies only the calling
    # thread). A test process always has some (pytest-xdist's channel, a paramiko
    # transport an earlier test left), none of which the child touches: let it fork here,
    # so that what is compared is really one process against two.
    monkeypatch.setattr(memsync.local.forking, "threading", SimpleNamespace(active_count=lambda: 1))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    return forks


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("processes", [1, 2])
def test_the_lines_read_back_are_the_views_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, processes: int
) -> None:
    forks = _in_two_processes(monkeypatch) if processes == 2 else []
    rng = random.Random(seed)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, _lines(rng, 2000))
    _write(b, _lines(rng, 1000), torn=b'{"id": "torn", "kind"')
    # Small reads, so that long lines fall across chunks and cut a chunk's first line;
    # small runs, so that the second pass reads many of them.
    monkeypatch.setattr(memsync.local.located, "_CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr(memsync.local.located, "_RUN_BYTES", 4096)
    whole = view_of([a, b], NOW)
    with located_view([a, b], NOW) as view:
        assert [r.raw for r in view.records] == [b""] * len(whole.records)
        assert list(view.lines()) == [r.raw for r in whole.records]
        assert [(r.id, r.ts) for r in view.records] == [(r.id, r.ts) for r in whole.records]
        # Every superseding entry, in the files' order, and where its line is (handoff).
        found = view.scan.superseding or []
        places = [Located(b"", "", 0, False, False, None, None, at, 0) for _, at in found]
        assert list(zip(view.lines_of(places), (rid for rid, _ in found), strict=True)) == [
            (r.raw, r.supersedes) for r in _superseding([a, b])
        ]
        assert found
    assert view.scan.bad == whole.bad  # the same lines, numbers and order, either way
    assert [str(b) for b in whole.bad if "longer than" in b.reason]  # the shape was there
    # The same conflicts (rule 7), whichever fold and however many processes met them.
    twins = check_files([a, b], NOW).twins
    assert [(x.raw, y.raw) for x, y in twins] == [(x.raw, y.raw) for x, y in whole.twins]
    assert twins  # the shape was there
    assert view.scan.headerless == whole.headerless
    assert len(forks) == (2 if processes == 2 else 0)  # the view's fold, then check's


def _superseding(paths: list[Path]) -> list[Record]:
    out: list[Record] = []

    def visit(_name: str, _line: int, rec: Record) -> None:
        if rec.supersedes is not None and not rec.deleted:
            out.append(rec)

    scan(paths, visit=visit)
    return out


@pytest.mark.parametrize("where", ["first", "second"])
def test_an_error_in_either_half_is_raised_as_one_process_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A header of another format (rule 2) is an error naming its file and line, whichever
    process meets it (the child's failure makes the parent fold its half again)."""
    lines = _lines(random.Random(9), 400)
    at = 10 if where == "first" else 390
    lines.insert(at, b'{"format": "agent-memory/2.0"}')
    path = tmp_path / "m.jsonl"
    _write(path, lines)
    with pytest.raises(UnsupportedFormat) as one:
        located_view([path], NOW)
    forks = _in_two_processes(monkeypatch)
    with pytest.raises(UnsupportedFormat) as two:
        located_view([path], NOW)
    assert str(two.value) == str(one.value)
    assert f"m.jsonl:{at + 2}:" in str(two.value)  # after the header line
    assert forks == [1]


def _folded(path: Path, state: Path) -> tuple[object, ...]:
    """What a fold of `path` for a persistent view in `state` found: the view's lines, the
    bad lines, how many twins, the records and the lines read."""
    with located_view([path], NOW, ViewStore(StateDir(state), min_bytes=0)) as view:
        scan = view.scan
        return list(view.lines()), scan.bad, len(scan.index.twins), scan.index.records, scan.lines


def test_a_child_that_fails_after_sending_its_half_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that sent its whole half but did not exit cleanly (killed after its last
    write) is a failed child: the parent folds the second half again, and what the child
    sent is not counted twice (bad lines, twins, records, the lines read, which number
    the persistent view's next line)."""
    lines = _lines(random.Random(5), 600)
    for at, text in ((10, "one"), (11, "two"), (580, "three"), (581, "four")):
        twin = {"id": f"tw{at // 100}", "kind": "fact", "text": text, "created_at": format_ts(T0)}
        lines.insert(at, json.dumps(twin).encode())
    path = tmp_path / "m.jsonl"
    _write(path, lines)

    one = _folded(path, tmp_path / "one")
    forks = _in_two_processes(monkeypatch)
    real_send = memsync.local.fold_halves._send

    def send_then_die(fd: int, half: ScanResult) -> None:
        real_send(fd, half)
        os._exit(9)

    monkeypatch.setattr(memsync.local.fold_halves, "_send", send_then_die)
    two = _folded(path, tmp_path / "two")
    assert forks == [1]
    assert one[1]
    assert one[2]  # the shapes are there: bad lines, twins
    assert one[4] == path.read_bytes().count(b"\n")
    assert two == one


def test_a_fork_that_fails_folds_both_halves_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process or memory to spare (`os.fork` raising EAGAIN): the view is folded in
    this process, the same as one fold's, instead of the command failing."""
    lines = _lines(random.Random(6), 600)
    path = tmp_path / "m.jsonl"
    _write(path, lines)

    one = _folded(path, tmp_path / "one")
    forks = _in_two_processes(monkeypatch)

    def no_fork() -> int:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert _folded(path, tmp_path / "two") == one
    assert forks == [1]  # the two-process fold was tried


def test_a_tie_goes_to_the_greater_canonical_line_read_again(tmp_path: Path) -> None:
    ts = format_ts(T0)
    small = json.dumps({"id": "x", "kind": "fact", "text": "a", "created_at": ts}).encode()
    great = json.dumps({"id": "x", "kind": "fact", "text": "b", "created_at": ts}).encode()
    for order in ([small, great], [great, small]):
        path = tmp_path / "m.jsonl"
        _write(path, order)
        with located_view([path], NOW) as view:
            assert list(view.lines()) == [great]  # rule 9: the greater canonical JSON
            assert len(view.scan.index.twins) == 1  # rule 7: twins, reported


def test_a_file_replaced_between_the_passes_is_read_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, _lines(random.Random(7), 500))
    expected = [r.raw for r in view_of([path], NOW).records]
    with located_view([path], NOW) as view:
        # A compaction's atomic replace: another inode under the same name.
        replacement = tmp_path / "new.jsonl"
        _write(replacement, [])
        os.replace(replacement, path)
        assert list(view.lines()) == expected


def test_a_file_rewritten_in_place_between_the_passes_is_an_error_naming_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, _lines(random.Random(8), 200))
    with located_view([path], NOW) as view:
        with path.open("r+b") as f:  # not memsync's way (rule 13): truncated in place
            f.truncate(200)
        with pytest.raises(OSError, match=r"m\.jsonl: changed while it was read"):
            list(view.lines())


def test_check_reads_the_same_in_one_or_two_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check` folds like the view: bad lines, twins, credential-shaped text and records
    dated ahead are the same, in the same order, whichever process met them."""
    rng = random.Random(11)
    lines = _lines(rng, 1500)
    token = "ghp_" + "a1B2c3D4e5" * 3 + "F6G7H8"  # a GitHub token's shape, not a real one
    for at in (30, 1400):  # one in each half; the twins' third version in the other
        for text in ("one", "two", "three")[: 2 if at == 30 else 3]:
            twin = {"id": "tw", "kind": "fact", "text": text, "created_at": format_ts(T0)}
            lines.insert(at if text != "three" else 20, json.dumps(twin).encode())
        lines.insert(
            at,
            json.dumps(
                {"id": f"s{at}", "kind": "fact", "text": token, "created_at": format_ts(T0)}
            ).encode(),
        )
        lines.insert(
            at,
            json.dumps(
                {
                    "id": f"f{at}",
                    "kind": "fact",
                    "text": "ahead",
                    "created_at": format_ts(NOW + 86_400 * SECOND),
                }
            ).encode(),
        )
    path = tmp_path / "m.jsonl"
    _write(path, lines)
    one = check_files([path], NOW)
    forks = _in_two_processes(monkeypatch)
    two = check_files([path], NOW)
    assert forks == [1]
    assert len(one.secrets) == len(one.future) == 2
    assert one.twins
    assert one.bad
    doc_one, doc_two = one.to_json(), two.to_json()
    pairs = [
        (json.loads(t["kept"])["text"], json.loads(t["other"])["text"]) for t in doc_one["twins"]
    ]
    # Each content once ("one" and "two" were written twice), against "two", which won
    # (rule 9: the greatest canonical text), the others greatest first.
    assert pairs == [("two", "three"), ("two", "one")]
    assert doc_two == doc_one


@pytest.mark.parametrize("processes", [1, 2])
def test_a_fold_for_the_persistent_view_describes_each_version_as_its_line_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """A cold fold that writes a store (issue 20) keeps each version's kind, scope and
    confidence from the decode of its line (rule 3's defaults when absent), in one
    process or two (the child's `Described` records cross the pipe whole)."""
    forks = _in_two_processes(monkeypatch) if processes == 2 else []
    rng = random.Random(7)
    lines = _lines(rng, 600)
    for n in range(0, len(lines), 5):  # scopes and confidences, some left to the defaults
        obj = json.loads(lines[n]) if lines[n].startswith(b'{"') else {}
        if "kind" in obj:
            obj["scope"] = f"project:p{n % 3}"
            obj["confidence"] = [0.0, -0.0, 0.25, 1][n % 4]
            obj["kind"] = "lesson"
            lines[n] = json.dumps(obj).encode()
    a = tmp_path / "a.jsonl"
    _write(a, lines)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    with located_view([a], NOW, store) as view:
        assert view.described
        assert not view.resumed
        found = [(r.kind, r.scope, repr(r.confidence)) for r in view.records]  # type: ignore[attr-defined]
        assert {type(r) for r in view.records} == {Described}
        wanted = []
        for raw in view.lines():
            obj = json.loads(raw)
            wanted.append(
                (obj["kind"], obj.get("scope", "global"), repr(float(obj.get("confidence", 1.0))))
            )
    assert found == wanted
    assert ("lesson", "project:p1", "-0.0") in found  # the shapes were there
    assert len(forks) == (processes == 2)
