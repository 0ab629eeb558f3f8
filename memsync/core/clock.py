"""The write clock's rule (hybrid stamps) and the limits on how far ahead a date may be.

Pure: the caller reads the clock and the file and passes `now` and the stamps it found.
"""

from __future__ import annotations

from collections.abc import Iterable

from memsync.core.timestamps import MS, SECOND

__all__ = ["FUTURE_TOLERANCE", "MAX_FUTURE", "next_stamp"]

MAX_FUTURE = 24 * 3600 * SECOND
"""A record dated more than this ahead of the local clock is held, not trusted."""

FUTURE_TOLERANCE = 5 * 60 * SECOND
"""`check` reports records dated more than this ahead of the local clock."""


def next_stamp(now: int, recent: Iterable[int], newest_of_id: int | None) -> int:
    """The `created_at` for a new record: a hybrid clock.

    At least `now`; at least 1 ms after `newest_of_id`, the newest record of the same id (so
    a `forget` or a new version written on a machine whose clock is behind still wins, where
    last-writer-wins on raw clocks would silently drop it); and never before the newest of
    `recent`, the stamps near the end of the file, which is where memsync's own last write
    is (clocks step backwards). Stamps more than `MAX_FUTURE` ahead of `now` are not
    followed: one broken clock must not drag every later write into the future. Rounded up
    to whole milliseconds.
    """
    limit = now + MAX_FUTURE
    floor = now
    for ts in recent:
        if floor < ts <= limit:
            floor = ts
    if newest_of_id is not None:
        floor = max(floor, newest_of_id + MS)
    return -(-floor // MS) * MS  # whole milliseconds, rounded up
