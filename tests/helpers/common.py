"""Facts several test modules check against."""

from __future__ import annotations

JSON_KEYS = {
    "dest",
    "appended",
    "bytes_appended",
    "repeated",
    "duplicates",
    "beaten",
    "held",
    "withheld",
    "bad",
    "twins",
    "dry_run",
}
"""The keys of a merge's (and a handoff's) `--json` document (`MergeResult.to_json`)."""
