"""Timestamps (SEMANTICS rules 3 and 6): RFC 3339 with a zone, compared as instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.core.timestamps import (
    MS,
    SECOND,
    canonical_ts,
    format_ts,
    from_datetime,
    parse_ts,
)

_INSTANT = parse_ts("2026-11-09T07:51:02Z")
assert _INSTANT is not None
INSTANT: int = _INSTANT


def test_the_three_spellings_of_rule_6_are_one_instant() -> None:
    """Rule 6: `...T07:51:02Z`, `...T07:51:02.000Z` and `...T08:51:02+01:00` are equal."""
    spellings = ["2026-11-09T07:51:02Z", "2026-11-09T07:51:02.000Z", "2026-11-09T08:51:02+01:00"]
    assert {parse_ts(s) for s in spellings} == {INSTANT}


def test_instants_are_microseconds_since_the_epoch() -> None:
    assert parse_ts("1970-01-01T00:00:00Z") == 0
    assert parse_ts("1970-01-01T00:00:01Z") == SECOND
    assert parse_ts("1970-01-01T00:00:00.001Z") == MS
    assert parse_ts("1969-12-31T23:59:59Z") == -SECOND


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-11-09T13:21:02+05:30", "2026-11-09T07:51:02Z"),
        ("2026-11-08T23:51:02-08:00", "2026-11-09T07:51:02Z"),
        ("2026-11-09T07:51:02+00:00", "2026-11-09T07:51:02Z"),
        ("2026-11-09T07:51:02-00:00", "2026-11-09T07:51:02Z"),
        ("2026-11-10T00:51:02+17:00", "2026-11-09T07:51:02Z"),
        ("2027-01-01T00:30:00+01:00", "2026-12-31T23:30:00Z"),  # across a year boundary
    ],
)
def test_offsets_map_to_the_same_instant(text: str, utc: str) -> None:
    assert parse_ts(text) == parse_ts(utc)


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2026-11-09T07:51:02.5Z", 500_000),
        ("2026-11-09T07:51:02.50Z", 500_000),
        ("2026-11-09T07:51:02.123Z", 123_000),
        ("2026-11-09T07:51:02.123456Z", 123_456),
        ("2026-11-09T07:51:02.000001Z", 1),
        ("2026-11-09T08:51:02.250+01:00", 250_000),
    ],
)
def test_fractions_of_a_second(text: str, micros: int) -> None:
    assert parse_ts(text) == INSTANT + micros


def test_digits_beyond_the_microsecond_are_rounded() -> None:
    """The module's contract: instants are kept to the microsecond; more digits round."""
    assert parse_ts("2026-11-09T07:51:02.0000004Z") == INSTANT
    assert parse_ts("2026-11-09T07:51:02.0000006Z") == INSTANT + 1
    assert parse_ts("2026-11-09T07:51:02.123456789Z") == INSTANT + 123_457


def test_lowercase_t_and_z_are_rfc_3339() -> None:
    """RFC 3339 section 5.6: "T" and "Z" may be written in lower case."""
    assert parse_ts("2026-11-09t07:51:02z") == INSTANT


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-09T07:51:02",  # naive: no zone
        "2026-11-09T07:51:02.000",
        "2026-11-09",  # a date alone
        "07:51:02Z",  # a time alone
        "yesterday",
        "",
        "2026-02-30T00:00:00Z",  # February 30th
        "2026-02-29T00:00:00Z",  # not a leap year
        "2026-13-01T00:00:00Z",
        "2026-11-09T24:00:00Z",
        "2026-11-09T07:60:00Z",
        "2016-12-31T23:59:60Z",  # a leap second: Python's datetime cannot hold it
        "2026-11-09T07:51Z",  # no seconds
        "2026-11-09T07:51:02+01",  # offset without minutes
        "2026-11-09T07:51:02+24:00",
        "2026-11-09T07:51:02 Z",
        "2026-11-09T07:51:02UTC",
        "20261109T075102Z",  # ISO 8601 basic format
        "2026-11-09T07:51:02.Z",
        "2026-11-09T07:51:02,5Z",
        " 2026-11-09T07:51:02Z",
        "2026-11-09T07:51:02Z ",
        "1700000000",
    ],
)
def test_rejects(text: str) -> None:
    assert parse_ts(text) is None


def test_rejects_an_offset_without_colon() -> None:
    assert parse_ts("2026-11-09T07:51:02+0100") is None


@pytest.mark.parametrize("value", [None, 1_700_000_000, 1.5, b"2026-11-09T07:51:02Z", ["x"]])
def test_non_strings_are_not_timestamps(value: object) -> None:
    assert parse_ts(value) is None


def test_from_datetime_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="naive"):
        from_datetime(datetime(2026, 11, 9, 7, 51, 2))  # noqa: DTZ001 - the point of the test


def test_from_datetime_of_aware_datetimes() -> None:
    tz = timezone(timedelta(hours=1))
    assert from_datetime(datetime(2026, 11, 9, 8, 51, 2, tzinfo=tz)) == INSTANT
    assert from_datetime(datetime(2026, 11, 9, 7, 51, 2, tzinfo=UTC)) == INSTANT


def test_format_ts_writes_milliseconds_and_utc() -> None:
    """The form memsync writes: UTC, `Z`, milliseconds (microseconds only when present)."""
    assert format_ts(INSTANT) == "2026-11-09T07:51:02.000Z"
    assert format_ts(INSTANT + 250 * MS) == "2026-11-09T07:51:02.250Z"
    assert format_ts(INSTANT + 7) == "2026-11-09T07:51:02.000007Z"


def test_canonical_ts_is_one_text_per_instant() -> None:
    """Rule 7: canonical JSON normalizes timestamps, so equal instants give equal text."""
    forms = ["2026-11-09T07:51:02Z", "2026-11-09T07:51:02.000Z", "2026-11-09T08:51:02+01:00"]
    texts = set()
    for form in forms:
        us = parse_ts(form)
        assert us is not None
        texts.add(canonical_ts(us))
    assert texts == {"2026-11-09T07:51:02.000000Z"}


def _us(text: str) -> int:
    us = parse_ts(text)
    assert us is not None
    return us


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RANGE = st.integers(min_value=_us("1900-01-01T00:00:00Z"), max_value=_us("2200-01-01T00:00:00Z"))


@given(_RANGE)
def test_format_and_canonical_forms_round_trip(us: int) -> None:
    """What memsync writes, it reads back as the same instant."""
    assert parse_ts(format_ts(us)) == us
    assert parse_ts(canonical_ts(us)) == us


@given(_RANGE, st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59))
def test_any_offset_spelling_is_the_same_instant(us: int, offset_minutes: int) -> None:
    """Rule 6 for every offset: the local spelling of an instant parses to that instant."""
    tz = timezone(timedelta(minutes=offset_minutes))
    local = (_EPOCH + timedelta(microseconds=us)).astimezone(tz)
    assert parse_ts(local.isoformat()) == us
