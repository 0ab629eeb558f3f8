"""The optional capabilities of transports are declared Protocols (issue 19, item 4): a
pass asks `isinstance(t, Truncates)` and mypy checks what it calls then. Which transport
has which, without connecting to anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync import InMemoryTransport, open_transport
from memsync.hub.transports import Fragments, PushChunks, Transport, Truncates, WriteMode


@pytest.fixture
def transports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Transport]:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of the tester's
    return {
        "folder": open_transport(str(tmp_path)),
        "memory": InMemoryTransport(),
        "ssh": open_transport("ssh://me@vm/srv/memsync"),
        "s3": open_transport("s3://bucket/hub", endpoint_url="http://127.0.0.1:1"),
    }


def test_which_transport_can_do_what(transports: dict[str, Transport]) -> None:
    def having(capability: type) -> set[str]:
        return {name for name, t in transports.items() if isinstance(t, capability)}

    # A torn write is cut back where files can be cut; S3 ends it with a newline instead.
    assert having(Truncates) == {"folder", "memory", "ssh"}
    # S3 alone writes one object per write, asks for larger pushes, joins small segments
    # and has two ways of writing safely.
    assert having(PushChunks) == having(Fragments) == having(WriteMode) == {"s3"}


def test_a_capability_is_used_as_declared(tmp_path: Path) -> None:
    hub = InMemoryTransport()
    hub.write_at("me", "a.jsonl", 0, b'{"format":"agent-memory/0.1"}\n{"id":')
    assert isinstance(hub, Truncates)
    hub.truncate("me", "a.jsonl", 30)
    assert hub.size("me", "a.jsonl") == 30
