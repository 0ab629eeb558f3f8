"""The S3 hub's object layout, pure: `<prefix>/<folder>/<file>/<generation>/<offset>`
objects grouped into files from one listing (`memsync.hub.transports.s3`).

A listing is untrusted input: keys that do not parse are ignored, and a file whose
segments do not tile from offset 0 is marked unreadable with the reason.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from memsync.hub.transports.base import validate_name

_GEN = re.compile(r"\d{16}")
_OFFSET = re.compile(r"\d{20}")
_MODE_DIR = ".mode"


@dataclass(frozen=True, slots=True)
class _Segment:
    offset: int
    size: int
    key: str


@dataclass
class _File:
    """One hub file as the listing shows it: its current generation's segments."""

    name: str
    generation: str
    segments: list[_Segment] = field(default_factory=list)
    older: list[str] = field(default_factory=list)  # keys of older generations (garbage)
    problem: str | None = None  # why it cannot be read (segments that do not tile)

    @property
    def size(self) -> int:
        return self.segments[-1].offset + self.segments[-1].size if self.segments else 0


@dataclass
class _Listing:
    at: float
    files: dict[str, _File]
    modes: set[str]


def _new_generation(after: str | None) -> str:
    """A generation above `after`: now in microseconds, or `after` + 1 if the clock lags."""
    now = time.time_ns() // 1000
    if after is not None:
        now = max(now, int(after) + 1)
    return f"{now:016d}"


def _parse(where: str, base: str, objects: list[tuple[str, int]]) -> _Listing:
    """Group a folder's keys into files (untrusted: keys that do not parse are ignored)."""
    gens: dict[str, dict[str, list[_Segment]]] = {}
    modes: set[str] = set()
    for key, size in objects:
        if not key.startswith(base):
            continue  # not asked for: a store answering with other keys is not trusted
        rest = key[len(base) :].split("/")
        if len(rest) == 2 and rest[0] == _MODE_DIR and rest[1] in ("conditional", "plain"):
            modes.add(rest[1])
            continue
        if len(rest) != 3:
            continue
        name, gen, offset = rest
        if not validate_name(name) or not _GEN.fullmatch(gen) or not _OFFSET.fullmatch(offset):
            continue
        gens.setdefault(name, {}).setdefault(gen, []).append(_Segment(int(offset), size, key))
    files: dict[str, _File] = {}
    for name, by_gen in gens.items():
        current = max(by_gen)
        segments = sorted(by_gen[current], key=lambda s: s.offset)
        older = [s.key for g, segs in by_gen.items() if g != current for s in segs]
        f = _File(name, current, segments, older)
        expected, before = 0, "the file's start"
        for seg in segments:
            if seg.offset != expected:
                f.problem = (
                    f"{where}/{name}: generation {current}: {before} ends at {expected}, but "
                    f"the next segment starts at {seg.offset} (truncated, lost or planted by "
                    "hand?); not read"
                )
                break
            expected = seg.offset + seg.size
            before = f"segment {seg.key.rsplit('/', 1)[-1]}"
        files[name] = f
    return _Listing(time.monotonic(), files, modes)
