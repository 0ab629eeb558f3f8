"""What the replicas of a hub know of each other: watermarks, acknowledgement, and when a
replica counts as silent or back (pure; the files are read and written by `memsync.hub`).

Each replica publishes `<replica>.watermarks.json` in each memory folder of the hub: how
far it has read every peer's file. Compaction may drop a tombstone only when every replica
known in the hub has read past it (SEMANTICS rule 15). A replica cannot know where a
tombstone sits in the hub files, but it knows, for each of its passes, how far it had read
every file then (a *snapshot*): everything it had learned the hub holds by then lies below
those offsets. So a tombstone first seen in the hub at time S is acknowledged once some
snapshot taken at or after S is covered by every other replica's watermarks. A replica
that compacts its own hub file against its local file also publishes how far it had read
then ("weighed", issue 24): its hub file may hold an entry a tombstone deletes until then,
so those positions are the ones a tombstone must be covered by.

Watermark files are data from other machines: parsed defensively, never trusted for
anything but holding a tombstone back (a bogus watermark can only keep tombstones longer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from memsync.core.timestamps import parse_ts

__all__ = [
    "WATERMARK_SUFFIX",
    "MarksDoc",
    "Position",
    "Snapshot",
    "SnapshotDoc",
    "Standing",
    "Watermarks",
    "acknowledged",
    "came_back",
    "covered_snapshot",
    "covers",
    "marks_of",
    "parse_watermarks",
    "snapshot_of",
    "standing",
]

WATERMARK_SUFFIX = ".watermarks.json"
_MAX_WATERMARK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Watermarks:
    """A replica's published read positions: file name -> (offset, generation)."""

    replica: str
    read: dict[str, tuple[int, str | None]]
    updated_at: int | None
    weighed: dict[str, tuple[int, str | None]] | None = None
    """How far it had read every file when it last compacted its own hub file against its
    local file (issue 24): a tombstone read by then deletes nothing left in that file.
    None: not published (an older memsync, or no such compaction yet)."""

    def as_weighed(self) -> Watermarks:
        """These marks with `weighed` as the read positions, when published: what rule 15's
        acknowledgement asks of a peer (a tombstone may go only once every peer's own hub
        file holds nothing it deletes). Else the read positions, as before."""
        if self.weighed is None:
            return self
        return Watermarks(self.replica, self.weighed, self.updated_at, self.weighed)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """How far this replica had read every hub file at `time` (microseconds)."""

    time: int
    sizes: dict[str, tuple[int, str | None]]


def parse_watermarks(replica: str, data: bytes) -> Watermarks | None:
    """A watermark document, or None when it is not one (untrusted input)."""
    if len(data) > _MAX_WATERMARK_BYTES:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("read"), dict):
        return None
    weighed = doc.get("weighed")
    return Watermarks(
        replica,
        _positions(doc["read"]),
        parse_ts(doc.get("updated_at")),
        _positions(weighed) if isinstance(weighed, dict) else None,
    )


def _positions(doc: dict[Any, Any]) -> dict[str, tuple[int, str | None]]:
    """The valid `{name: {"offset", "generation"}}` entries of an untrusted document."""
    out: dict[str, tuple[int, str | None]] = {}
    for name, pos in doc.items():
        if not isinstance(name, str) or not isinstance(pos, dict):
            continue
        offset, gen = pos.get("offset"), pos.get("generation")
        if type(offset) is int and offset >= 0 and (gen is None or isinstance(gen, str)):
            out[name] = (offset, gen)
    return out


def covers(marks: Watermarks, snapshot: Snapshot) -> bool:
    """Whether a replica had read every file of the snapshot at least as far (its own file
    aside: it wrote it)."""
    for name, (size, gen) in snapshot.sizes.items():
        if name == marks.replica + ".jsonl" or size == 0:
            continue
        offset, their_gen = marks.read.get(name, (0, None))
        if their_gen != gen or offset < size:
            return False
    return True


def covered_snapshot(
    snapshots: list[Snapshot], others: Mapping[str, Watermarks | None]
) -> Snapshot | None:
    """The latest snapshot every other replica covers; None when there is none (a replica
    without readable watermarks holds every tombstone back)."""
    for snap in sorted(snapshots, key=lambda s: s.time, reverse=True):
        if all(m is not None and covers(m, snap) for m in others.values()):
            return snap
    return None


def acknowledged(seen: int | None, covered: Snapshot | None) -> bool:
    """Whether a tombstone first seen in the hub at `seen` (None: never seen there) is
    acknowledged (rule 15): seen no later than `covered`, a snapshot every other replica
    has read past (`covered_snapshot`)."""
    return covered is not None and seen is not None and seen <= covered.time


Position = list[Any]
"""`[offset, generation]` as kept in the sync state (JSON: a list)."""


class SnapshotDoc(TypedDict):
    """A `Snapshot` as the sync state keeps it (JSON)."""

    time: int
    sizes: dict[str, Position]


class MarksDoc(TypedDict):
    """A peer's watermarks as the sync state caches them (JSON): the size and mtime of its
    watermark file when read, and what it said (`read` None: not a watermark document;
    `weighed` missing or None: not said, see `Watermarks.weighed`)."""

    size: int
    mtime: float
    read: dict[str, Position] | None
    updated_at: int | None
    weighed: NotRequired[dict[str, Position] | None]


def snapshot_of(doc: SnapshotDoc) -> Snapshot:
    """The `Snapshot` a state document holds."""
    return Snapshot(doc["time"], {k: (v[0], v[1]) for k, v in doc["sizes"].items()})


def marks_of(replica: str, doc: MarksDoc | None) -> Watermarks | None:
    """The `Watermarks` a state document holds for `replica`, or None (none readable)."""
    positions = None if doc is None else doc.get("read")
    if doc is None or positions is None:
        return None
    read = {k: (v[0], v[1]) for k, v in positions.items()}
    weighed = doc.get("weighed")
    return Watermarks(
        replica,
        read,
        doc.get("updated_at"),
        None if weighed is None else {k: (v[0], v[1]) for k, v in weighed.items()},
    )


Standing = Literal["ok", "silent", "back"]
"""How a replica stands for compaction (rule 15): "silent" (no watermarks, or none for
longer than the tombstone horizon: it holds tombstones back), "back" (retired, yet its
watermarks are recent: entries deleted meanwhile may come back from it), or "ok"."""


def standing(seen: int | None, *, now: int, horizon: float, retired: bool) -> Standing:
    """How a replica whose watermarks were last updated at `seen` stands at `now`."""
    if retired:
        return "back" if seen is not None and now - seen < horizon else "ok"
    if seen is None or now - seen > horizon:
        return "silent"
    return "ok"


def came_back(last: int | None, seen: int | None, *, now: int, horizon: float) -> bool:
    """Whether a replica whose watermarks were updated at `last` (as known before a pass)
    and are now updated at `seen` publishes again after a silence longer than the horizon."""
    return seen is not None and last is not None and seen != last and now - last > horizon
