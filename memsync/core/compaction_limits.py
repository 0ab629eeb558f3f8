"""Compaction's bounds and defaults, and the bad line it sets aside: what the command line,
appending and the drain need of compaction without importing the view (issue 20: `add`'s
start-up). `memsync.core.compaction` re-exports every name.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_MAX_POSTPONE_SECONDS",
    "DEFAULT_QUIET_SECONDS",
    "MAX_HORIZON_DAYS",
    "MAX_POSTPONE_SECONDS",
    "MAX_WAIT_SECONDS",
    "Rejected",
]

MAX_HORIZON_DAYS = 36_500
"""The longest tombstone horizon accepted (a hundred years): past it a value is a typo."""

MAX_WAIT_SECONDS = 86_400.0
"""The longest quiet period, grace period or poll interval accepted (a day): past it a
value is a typo, and `inf` or 1e12 seconds overflow the scheduler (issue 13, item 17)."""

DEFAULT_HORIZON_DAYS = 90.0
"""Tombstones older than this many days may go (rule 15), once every replica has read them."""

DEFAULT_QUIET_SECONDS = 60.0
"""Compact a file only after it has not changed for this many seconds (rule 16)."""

DEFAULT_MAX_POSTPONE_SECONDS = 86_400.0
"""How long the daemon postpones compaction of a file that is never quiet (agents writing
continuously) before it compacts anyway, under the lock, with the drain of rule 16."""

MAX_POSTPONE_SECONDS = 7 * 86_400.0
"""The longest such bound accepted (a week): past it a file may grow unchecked."""

DEFAULT_GRACE_SECONDS = 5.0
"""How long, at most, to keep draining the old inode for a writer that opened the file just
before the rename (rule 16)."""


class Rejected(msgspec.Struct, frozen=True):
    """A bad line for the side file: where it was, its bytes (no "\\n"), and why."""

    line: int
    raw: bytes
    reason: str
