"""The exception tree (errors.py): every error is a `MemsyncError`, carries its fields, reads
well as a string and survives pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import memsync
from memsync import Memory, open_transport
from memsync.errors import (
    DaemonAlreadyRunning,
    FileReplaced,
    MemsyncError,
    TransportError,
    TransportTimeout,
    UnknownId,
    UsageError,
)

EXAMPLES: list[MemsyncError] = [
    UnknownId("me.jsonl", "3f9a1c2b7d10"),
    UnknownId("me.jsonl", "3f9a1c2b7d10", live=True),
    FileReplaced("me.jsonl", "handoff"),
    DaemonAlreadyRunning("/var/lib/memsync"),
    UsageError("merge: cannot merge a file into itself"),
    TransportError("ssh://me@vm:22/hub/a.jsonl: connection reset", "vm", "/hub/a.jsonl"),
    TransportTimeout("ssh://me@vm:22/hub: timed out", "vm", "/hub"),
]


@pytest.mark.parametrize("exc", EXAMPLES, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_their_fields(exc: MemsyncError) -> None:
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert str(again) == str(exc)
    assert vars(again) == vars(exc)


def test_every_public_error_is_in_the_tree() -> None:
    errors = [
        v for v in vars(memsync.errors).values() if isinstance(v, type) and issubclass(v, Exception)
    ]
    assert all(issubclass(e, MemsyncError) for e in errors)
    assert {e.__name__ for e in errors} == set(memsync.errors.__all__)


def test_messages_read_well() -> None:
    assert str(UnknownId("me.jsonl", "abc")) == "me.jsonl: no record with id 'abc'"
    assert str(UnknownId("me.jsonl", "abc", live=True)) == "me.jsonl: no live entry with id 'abc'"
    assert str(FileReplaced("f")) == "f: replaced repeatedly during the merge; try again"
    assert isinstance(FileReplaced("f"), OSError)
    assert "/var/lib/memsync" in str(DaemonAlreadyRunning("/var/lib/memsync"))


def test_forget_of_an_unknown_id(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "m.jsonl")
    with pytest.raises(UnknownId) as info:
        mem.forget("000000000000")
    assert (info.value.file, info.value.id) == (str(mem.path), "000000000000")
    with pytest.raises(UnknownId) as info:
        mem.supersede("000000000000", "New text.")
    assert info.value.live


def test_transport_errors_name_host_and_path(tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir()
    hub = open_transport("file", str(tmp_path / "hub"))
    with pytest.raises(TransportError) as info:
        hub.read("notes", "a.jsonl", 0, 10)
    assert info.value.host is None
    assert info.value.path == str(tmp_path / "hub" / "notes" / "a.jsonl")
    with pytest.raises(TransportError) as info:
        open_transport("ftp", "/srv/hub", host="vm")
    assert (info.value.host, info.value.path) == ("vm", "/srv/hub")
