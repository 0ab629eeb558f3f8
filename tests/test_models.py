"""The pydantic models handed to library users (`memsync.Entry`, `memsync.Tombstone`).

They sit at the edge: `classify` decides what a valid line is, and `to_model` must convert
every line it accepted, losing nothing. Built directly, the models are strict: lax
pydantic would coerce `"0.9"` into a confidence (STYLE guideline 7).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from pydantic import ValidationError

from memsync import Entry, Tombstone
from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.timestamps import from_datetime, parse_ts
from memsync.models import to_model
from tests.helpers.strategies import line_soups

CREATED = datetime(2026, 11, 1, tzinfo=UTC)
KNOWN_ENTRY = set(Entry.model_fields)
KNOWN_TOMBSTONE = set(Tombstone.model_fields)


def entry_dict(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": "a1a1a1a1a1a1",
        "kind": "lesson",
        "text": "Run the linters before pushing.",
        "confidence": 0.9,
        "created_at": CREATED,
    }
    obj.update(changes)
    return obj


def test_a_valid_entry() -> None:
    entry = Entry.model_validate(entry_dict(source="user"))
    assert entry.scope == "global"
    assert entry.tags == []
    assert entry.from_user
    assert entry.expires_at is None
    assert entry.supersedes is None


@pytest.mark.parametrize(
    "changes",
    [
        {"confidence": "0.9"},
        {"confidence": True},
        {"confidence": 1.5},
        {"confidence": -0.1},
        {"confidence": float("nan")},
        {"confidence": float("inf")},
        {"kind": "opinion"},
        {"text": 42},
        {"id": ""},
        {"id": 7},
        {"tags": "fetching"},
        {"tags": [1]},
        {"source": 3},
        {"created_at": datetime(2026, 11, 1)},  # noqa: DTZ001 - naive on purpose
        {"created_at": "2026-11-01T00:00:00Z"},  # strict: a str is not a datetime in Python
        {"created_at": 1_700_000_000},
        {"expires_at": datetime(2026, 12, 1)},  # noqa: DTZ001 - naive on purpose
    ],
    ids=repr,
)
def test_entry_is_strict(changes: dict[str, Any]) -> None:
    """Nothing is coerced: a value of the wrong type or out of range is refused."""
    with pytest.raises(ValidationError):
        Entry.model_validate(entry_dict(**changes))


@pytest.mark.parametrize("missing", ["id", "kind", "text", "created_at"])
def test_entry_requires_its_fields(missing: str) -> None:
    obj = entry_dict()
    del obj[missing]
    with pytest.raises(ValidationError):
        Entry.model_validate(obj)


def test_entry_from_json_is_strict_too() -> None:
    raw = json.dumps({**entry_dict(), "created_at": "2026-11-01T00:00:00Z", "confidence": "0.9"})
    with pytest.raises(ValidationError):
        Entry.model_validate_json(raw)


def test_models_are_frozen() -> None:
    entry = Entry.model_validate(entry_dict())
    with pytest.raises(ValidationError):
        entry.text = "changed"


def test_tombstone() -> None:
    tomb = Tombstone.model_validate({"id": "a1a1a1a1a1a1", "deleted": True, "created_at": CREATED})
    assert tomb.deleted is True
    for bad in ({"deleted": False}, {"deleted": "yes"}, {"id": ""}):
        with pytest.raises(ValidationError):
            Tombstone.model_validate(
                {"id": "a1a1a1a1a1a1", "deleted": True, "created_at": CREATED, **bad}
            )


def test_tombstone_refuses_a_naive_created_at() -> None:
    with pytest.raises(ValidationError):
        Tombstone.model_validate(
            {"id": "a", "deleted": True, "created_at": datetime(2026, 11, 1)}  # noqa: DTZ001
        )


def test_extra_fields_are_kept() -> None:
    entry = Entry.model_validate(entry_dict(**{"x-origin": {"host": "laptop"}}))
    assert entry.model_extra == {"x-origin": {"host": "laptop"}}


def _check_model(rec: Record) -> None:
    obj: dict[str, Any] = json.loads(rec.raw)
    model = to_model(rec)
    assert model.id == rec.id
    assert from_datetime(model.created_at) == rec.ts
    if rec.deleted:
        assert isinstance(model, Tombstone)
        known = KNOWN_TOMBSTONE
    else:
        assert isinstance(model, Entry)
        known = KNOWN_ENTRY
        assert model.kind == obj["kind"]
        assert model.text == obj["text"]
        assert model.scope == obj.get("scope", "global")
        assert model.tags == obj.get("tags", [])
        assert model.source == obj.get("source")
        assert model.confidence == obj.get("confidence", 1.0)
        assert model.supersedes == obj.get("supersedes")
        assert model.from_user == rec.user
        if model.expires_at is None:
            assert rec.expires is None
        else:
            assert from_datetime(model.expires_at) == rec.expires
    extra = {k: v for k, v in obj.items() if k not in known}
    assert (model.model_extra or {}) == extra


@given(line_soups())
def test_every_accepted_line_converts_to_its_model(lines: list[bytes]) -> None:
    """Every line `classify` accepts converts with `to_model`, to the right class, with the
    same id, instants and fields, and its unknown fields kept (rule 3)."""
    for raw in lines:
        rec = classify(raw)
        if isinstance(rec, Record):
            _check_model(rec)


@pytest.mark.parametrize(
    "created_at",
    [
        "2026-11-09t07:51:02z",
        "2026-11-09T08:51:02+01:00",
        "2026-11-09T07:51:02-00:00",
        "2026-11-09T07:51:02.5Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
    ],
)
def test_edge_timestamps_convert(created_at: str) -> None:
    raw = json.dumps({"id": "a", "kind": "fact", "text": "t", "created_at": created_at}).encode()
    rec = classify(raw)
    assert isinstance(rec, Record)
    _check_model(rec)


def test_entry_created_at_is_the_record_instant_beyond_microseconds() -> None:
    raw = json.dumps(
        {"id": "a", "kind": "fact", "text": "t", "created_at": "2026-11-09T07:51:02.1234567Z"}
    ).encode()
    rec = classify(raw)
    assert isinstance(rec, Record)
    assert from_datetime(to_model(rec).created_at) == rec.ts


@pytest.mark.slow
def test_an_offset_is_kept_as_an_aware_datetime() -> None:
    raw = b'{"id": "a", "kind": "fact", "text": "t", "created_at": "2026-11-09T08:51:02+01:00"}'
    rec = classify(raw)
    assert isinstance(rec, Record)
    model = to_model(rec)
    assert model.created_at.utcoffset() == timedelta(hours=1)
    assert model.created_at == datetime(2026, 11, 9, 7, 51, 2, tzinfo=UTC)
    assert parse_ts("2026-11-09T07:51:02Z") == rec.ts
