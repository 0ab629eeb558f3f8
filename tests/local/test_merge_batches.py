"""Large merges go in batches (memsync.local.batching.BATCH_LINES): the result must be the view a
single merge gives, with nothing appended twice and nothing appended by a merge again."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memsync.local.batching
import memsync.local.destination
import memsync.local.merge
from memsync.core.records import Record
from memsync.core.timestamps import SECOND, format_ts
from memsync.local.compaction import compact_file
from memsync.local.fresh import header_line
from memsync.local.merge import merge_indexed
from memsync.local.reading import view_of
from memsync.local.spill import Spill
from memsync.local.statedir import StateDir
from memsync.local.storage import Chunk

BASE = 1_790_000_000 * SECOND


def _lines(rng: random.Random, count: int) -> list[bytes]:
    """Entries, later versions, tombstones and supersessions over a few dozen ids, in a
    shuffled order, so that what beats what is spread across batches."""
    out = []
    ids = [f"id{i:03d}" for i in range(40)]
    for n in range(count):
        rid = rng.choice(ids)
        ts = format_ts(BASE + rng.randrange(10_000) * SECOND)
        roll = rng.random()
        if roll < 0.15:
            obj: dict[str, object] = {"id": rid, "deleted": True, "created_at": ts}
        else:
            obj = {"id": rid, "kind": "fact", "text": f"{rid} #{n}", "created_at": ts}
            if roll < 0.25:
                obj["source"] = "user"
            if roll > 0.95:
                obj["supersedes"] = rng.choice(ids)
        out.append(json.dumps(obj).encode())
    return out


def _view_key(path: Path) -> list[tuple[str, int, bytes]]:
    records: list[Record] = view_of([path], BASE + 10**6 * SECOND).records
    return [(r.id, r.ts, r.raw) for r in records]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_merge_in_batches_gives_the_view_of_one_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    src = tmp_path / "src.jsonl"
    lines = _lines(rng, 400)
    # Twice over (as `cat a a` would): a later batch must know what an earlier one appended.
    src.write_bytes(header_line(BASE) + b"".join(line + b"\n" for line in lines + lines))
    whole, batched = tmp_path / "whole.jsonl", tmp_path / "batched.jsonl"
    merge_indexed(whole, [src], StateDir(tmp_path / "state-whole"), now=BASE)
    monkeypatch.setattr(memsync.local.batching, "BATCH_LINES", 7)
    result = merge_indexed(batched, [src], StateDir(tmp_path / "state-batched"), now=BASE)
    assert result.appended > 0
    assert _view_key(batched) == _view_key(whole) == _view_key(src)
    written = batched.read_bytes().splitlines()
    # No record was appended twice as new; a line appears again only as rule 14's repeat
    # of an id's winning line after a beaten record that travels.
    assert len(written) - 1 - result.repeated == len(set(written[1:]))
    # Merging again, in batches or not, appends nothing.
    size = batched.stat().st_size
    again = merge_indexed(batched, [src], StateDir(tmp_path / "state-batched"), now=BASE)
    assert again.appended == 0
    memsync.local.merge.merge_files(batched, [src], now=BASE)
    assert batched.stat().st_size == size


def _source(tmp_path: Path, seed: int) -> Path:
    """`_lines` twice over, with a bad line and a credential-shaped one in the middle."""
    lines = _lines(random.Random(seed), 600)
    token = "ghp_" + "a1B2c3D4e5" * 3 + "F6G7H8"  # a GitHub token's shape, not a real one
    secret = {"id": "tok", "kind": "fact", "text": token, "created_at": format_ts(BASE)}
    lines[300:300] = [b"{not json", json.dumps(secret).encode()]
    src = tmp_path / "src.jsonl"
    src.write_bytes(header_line(BASE) + b"".join(line + b"\n" for line in lines + lines))
    return src


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("held", [False, True], ids=["into-empty", "into-held"])
def test_a_merge_in_partitions_by_id_gives_the_view_of_one_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, held: bool
) -> None:
    src = _source(tmp_path, seed)
    whole, parted = tmp_path / "whole.jsonl", tmp_path / "parted.jsonl"
    if held:  # the destinations already hold some of the ids, older and newer
        start = header_line(BASE) + b"".join(
            line + b"\n" for line in _lines(random.Random(seed + 100), 200)
        )
        whole.write_bytes(start)
        parted.write_bytes(start)
    one = memsync.local.merge.merge_files(whole, [src], now=BASE)
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)  # about 20 parts
    result = memsync.local.merge.merge_files(parted, [src], now=BASE)
    assert _view_key(parted) == _view_key(whole)
    # Nothing appended twice but rule 14's repeats, nothing but the sources' lines. (How
    # many lines travel may differ from one plan by a superseder or two: of several
    # superseders of one target, the first partition's travels, rule 14.)
    written = parted.read_bytes().splitlines()[1:]
    assert len(written) - result.repeated == len(set(written))
    assert set(written) - set(whole.read_bytes().splitlines()) <= set(src.read_bytes().splitlines())
    assert result.duplicates == one.duplicates
    # Reports name the source's own line numbers.
    assert [b["line"] for b in result.bad] == [b["line"] for b in one.bad] == [302]
    assert result.withheld == one.withheld
    assert [w["line"] for w in one.withheld] == [303]  # its copy is the same line: once
    # Merging again appends nothing; the partitions' temporary files are gone.
    size = parted.stat().st_size
    assert memsync.local.merge.merge_files(parted, [src], now=BASE).appended == 0
    assert parted.stat().st_size == size
    assert not [p.name for p in tmp_path.iterdir() if "spill" in p.name]


def _reads_of_the_destination(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the chunks merge plans read of their destination, as they read them."""
    read: list[int] = []
    real = memsync.local.destination._chunks_outside

    def counted(path: Path, skip: list[tuple[int, int]]) -> Iterator[Chunk]:
        for chunk in real(path, skip):
            read.append(chunk.end - chunk.start)
            yield chunk

    monkeypatch.setattr(memsync.local.destination, "_chunks_outside", counted)
    return read


def test_a_merge_in_partitions_does_not_read_what_it_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into an empty file, each partition's plan reads none of what the partitions before
    it appended (in arrival order, each batch read the whole growing file again)."""
    src = _source(tmp_path, 6)
    dest = tmp_path / "dest.jsonl"
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    read = _reads_of_the_destination(monkeypatch)
    memsync.local.merge.merge_files(dest, [src], now=BASE)
    parts = -(-src.stat().st_size // 4096)
    header = len(dest.read_bytes().split(b"\n", 1)[0]) + 1
    assert read  # the partitions' plans read the file...
    assert sum(read) <= 2 * parts * header  # ...its header only (the targets' ask too)


def test_a_merge_in_partitions_survives_a_compaction_between_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction replaces the file between two partitions: the ranges the merge
    appended are gone with the old inode, and the next partitions read all of it."""
    src = _source(tmp_path, 5)
    whole, parted = tmp_path / "whole.jsonl", tmp_path / "parted.jsonl"
    memsync.local.merge.merge_files(whole, [src], now=BASE)
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    compacted, calls = [], []

    def compact_now(what: str, *_: int) -> None:
        calls.append(what)
        if calls.count("merge: partitions") in (3, 9) and what == "merge: partitions":
            compacted.append(compact_file(parted, now=BASE, quiet_seconds=0, grace_seconds=0))

    memsync.local.merge.merge_files(parted, [src], now=BASE, progress=compact_now)
    assert len(compacted) == 2
    assert _view_key(parted) == _view_key(whole)
    assert memsync.local.merge.merge_files(parted, [src], now=BASE).appended == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_indexed_merge_in_partitions_gives_the_view_of_one_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """The indexed merge of many lines goes in partitions by id too, and brings its index
    up to date once at the end. Half the records are dated too far ahead at first: held
    in the index, and offered again by the next merge, partitioned with the new lines."""
    src = _source(tmp_path, seed)
    more = b"".join(line + b"\n" for line in _lines(random.Random(seed + 50), 300))
    whole, parted = tmp_path / "whole.jsonl", tmp_path / "parted.jsonl"
    early = BASE - 86_400 * SECOND + 5_000 * SECOND  # records after BASE + 5000 s: held
    state = StateDir(tmp_path / "state-parted")
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    result = merge_indexed(parted, [src], state, now=early)
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 1 << 30)
    first = merge_indexed(whole, [src], StateDir(tmp_path / "state-whole"), now=early)
    assert first.held
    assert len(result.held) == len(first.held)
    # New lines arrive: the next merge offers the held lines again with them (in
    # partitions, with a small enough size; in one batch for `whole`).
    with src.open("ab") as f:
        f.write(more)
    merge_indexed(whole, [src], StateDir(tmp_path / "state-whole"), now=BASE)
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    second = merge_indexed(parted, [src], state, now=BASE)
    assert second.appended > 0
    assert not second.held  # every held record was offered again, and judged
    assert _view_key(parted) == _view_key(whole)
    # The index is up to date: merging again appends nothing, without and with it.
    size = parted.stat().st_size
    assert merge_indexed(parted, [src], state, now=BASE).appended == 0
    assert memsync.local.merge.merge_files(parted, [src], now=BASE).appended == 0
    assert parted.stat().st_size == size


def test_a_few_new_lines_among_known_ones_are_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas that share most lines: only the lines the destination lacks are
    split, and so few go in one batch, which reads the destination once (one batch per
    partition would read it once each)."""
    src = _source(tmp_path, 7)
    dest = tmp_path / "dest.jsonl"
    dest.write_bytes(src.read_bytes())
    rng = random.Random(8)
    with src.open("ab") as f:  # a few new versions, of ids all over the partitions
        for i in range(30):
            obj = {
                "id": f"id{i:03d}",
                "kind": "fact",
                "text": f"new {i}",
                "created_at": format_ts(BASE + (20_000 + rng.randrange(1000)) * SECOND),
            }
            f.write(json.dumps(obj).encode() + b"\n")
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 4096)
    read = _reads_of_the_destination(monkeypatch)
    result = memsync.local.merge.merge_files(dest, [src], now=BASE)
    assert result.appended > 0
    assert result.duplicates >= 1200  # the shared lines, counted, not split
    assert sum(read) <= 2 * dest.stat().st_size  # the records' ask, and the targets' one


def test_partitions_grow_past_the_most_files_a_merge_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `MAX_PARTITIONS` partitions (each an open temporary file), partitions grow."""
    src = _source(tmp_path, 9)
    whole, parted = tmp_path / "whole.jsonl", tmp_path / "parted.jsonl"
    memsync.local.merge.merge_files(whole, [src], now=BASE)
    monkeypatch.setattr(memsync.local.batching, "PARTITION_BYTES", 64)  # thousands of parts
    monkeypatch.setattr(memsync.local.batching, "MAX_PARTITIONS", 3)
    opened = []
    real = Spill

    def spill(folder: Path) -> Spill:
        opened.append(folder)
        return real(folder)

    monkeypatch.setattr(memsync.local.batching, "Spill", spill)
    memsync.local.merge.merge_files(parted, [src], now=BASE)
    assert len(opened) == 3
    assert _view_key(parted) == _view_key(whole)


MERGE_IN_PARTITIONS = """
import sys
from pathlib import Path
import memsync.local.batching
from memsync.local.merge import merge_files

memsync.local.batching.PARTITION_BYTES = 4096
merge_files(Path(sys.argv[1]), [Path(sys.argv[2])], now=int(sys.argv[3]))
"""


def test_a_merge_in_partitions_gives_the_same_bytes_on_every_machine(tmp_path: Path) -> None:
    """Which partition an id goes to must not depend on the process (Python's `hash` of a
    string is salted per process): two machines merging the same files must write the
    same bytes, the same beaten superseders skipped (rule 14)."""
    src = _source(tmp_path, 7)
    start = header_line(BASE)  # a new file's header names its own instant and generation
    written = set()
    for hash_seed in ("1", "2", "3"):
        dest = tmp_path / f"dest{hash_seed}.jsonl"
        dest.write_bytes(start)
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = [sys.executable, "-c", MERGE_IN_PARTITIONS, str(dest), str(src), str(BASE)]
        subprocess.run(run, env=env, check=True)
        written.add(dest.read_bytes())
    assert len(written) == 1
