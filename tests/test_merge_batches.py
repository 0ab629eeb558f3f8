"""Large merges go in batches (memsync.local.merge.BATCH_LINES): the result must be the view a
single merge gives, with nothing appended twice and nothing appended by a merge again."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import memsync.local.merge
from memsync.core.records import Record
from memsync.core.timestamps import SECOND, format_ts
from memsync.local.fresh import header_line
from memsync.local.merge import merge_indexed
from memsync.local.reading import view_of

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
    merge_indexed(whole, [src], tmp_path / "state-whole", now=BASE)
    monkeypatch.setattr(memsync.local.merge, "BATCH_LINES", 7)
    result = merge_indexed(batched, [src], tmp_path / "state-batched", now=BASE)
    assert result.appended > 0
    assert _view_key(batched) == _view_key(whole) == _view_key(src)
    written = batched.read_bytes().splitlines()
    # No record was appended twice as new; a line appears again only as rule 14's repeat
    # of an id's winning line after a beaten record that travels.
    assert len(written) - 1 - result.repeated == len(set(written[1:]))
    # Merging again, in batches or not, appends nothing.
    size = batched.stat().st_size
    again = merge_indexed(batched, [src], tmp_path / "state-batched", now=BASE)
    assert again.appended == 0
    memsync.local.merge.merge_files(batched, [src], now=BASE)
    assert batched.stat().st_size == size
