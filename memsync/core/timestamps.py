"""RFC 3339 timestamps as integer microseconds since the Unix epoch (SEMANTICS rules 3, 6).

memsync compares instants, never strings: `...T07:51:02Z`, `...T07:51:02.000Z` and
`...T08:51:02+01:00` are the same instant and so the same key. Parsing is msgspec's RFC 3339
parser (in C, the same one that decodes record lines), with a zone required. Instants are
kept to the microsecond, as Python's datetime does: digits beyond it are rounded.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import msgspec

__all__ = [
    "MS",
    "SECOND",
    "Timestamp",
    "canonical_ts",
    "format_ts",
    "from_datetime",
    "parse_ts",
    "to_datetime",
]

SECOND = 1_000_000
MS = 1_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

_COLONLESS = re.compile(r"[+-]\d{4}\Z")  # ISO 8601's "+0100", which RFC 3339 does not allow

Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]
"""An RFC 3339 date-time with a zone, as msgspec decodes it."""


def parse_ts(text: object) -> int | None:
    """Parse an RFC 3339 timestamp with a zone into microseconds since the epoch.

    Return None when `text` is not a string or not a valid RFC 3339 date-time with a zone
    (a date alone, no zone, "yesterday", hour 24, February 30th, a leap second).
    """
    if type(text) is not str or _COLONLESS.search(text) is not None:
        return None
    try:
        dt = msgspec.convert(text, Timestamp)
    except msgspec.ValidationError:
        return None
    return from_datetime(dt)


def from_datetime(dt: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is refused)."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime: a timestamp needs a zone")
    return (dt - EPOCH) // _US


def to_datetime(us: int) -> datetime:
    """An aware UTC datetime for microseconds since the epoch."""
    return EPOCH + timedelta(microseconds=us)


def format_ts(us: int) -> str:
    """RFC 3339 UTC with milliseconds (the form memsync writes), or microseconds when the
    instant has them."""
    dt = to_datetime(us)
    spec = "milliseconds" if dt.microsecond % 1000 == 0 else "microseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"  # isoformat pads year 1


def canonical_ts(us: int) -> str:
    """The fixed-width form used inside canonical JSON (rule 7): equal instants, equal text."""
    return to_datetime(us).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
