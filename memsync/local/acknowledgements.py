"""Which tombstones past the horizon every replica has read (SEMANTICS rule 15), as the
caller of a compaction says it: the one question compaction cannot answer from the file.

Three answers, so that the safe one is the default (issue 19, item 6):

- None (the default): nobody said; every tombstone is kept, whatever its age. A library
  user compacting a file that a hub shares cannot drop a tombstone another machine has not
  read yet, which would bring the deleted entry back at its next sync.
- `ALL`: every tombstone past the horizon counts as read. Right only for a file no hub
  shares (`memsync compact` on a file no config names, a memory with no remote).
- a predicate `Callable[[Record], bool]`: the hub's word on one tombstone
  (`memsync.hub.compaction.acknowledged_for`, which reads the state directory as
  `memsync compact` and the daemon do).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final, Literal, TypeAlias

from memsync.core.compaction import Survey, expiring_tombstones
from memsync.core.records import Record

__all__ = ["ALL", "Acknowledgements", "acknowledged_lines"]


class _Everyone(enum.Enum):
    """The type of `ALL` (an enum member, so that mypy can tell it from a predicate)."""

    ALL = "ALL"

    def __repr__(self) -> str:
        return "memsync.ALL"


ALL: Final = _Everyone.ALL
"""`acknowledged=ALL`: every tombstone past the horizon counts as read by every replica."""

Acknowledgements: TypeAlias = Callable[[Record], bool] | Literal[_Everyone.ALL] | None
"""What a compaction is told of the tombstones every replica has read (module docstring)."""


def acknowledged_lines(
    survey: Survey, now: int, horizon: int, acknowledged: Acknowledgements
) -> frozenset[bytes] | None:
    """What the core's plan takes (rule 15): the lines of the tombstones past the horizon
    that every replica has read, asked of `acknowledged` here in the shell; None (the
    core's "no hub") for `ALL`, and no line at all when nobody said (None)."""
    if acknowledged is ALL:
        return None
    if acknowledged is None:
        return frozenset()
    expiring = expiring_tombstones(survey, now=now, horizon=horizon)
    return frozenset(t.raw for t in expiring if acknowledged(t))
