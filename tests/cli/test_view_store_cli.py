"""`show` and `prompt` answer from the persistent view in the state directory (issue 20):
the same output as with no state at all, before and after an append, and a store there."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memsync.cli import main
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import MIN_BYTES, ViewStore

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}\n'
NOW = "2026-12-01T00:00:00Z"
COMMANDS = (
    # The whole file first: in an empty state directory it folds the file (and writes no
    # store); once the store is there, it answers from its quick part.
    ("show", "--json"),
    ("prompt", "--max-chars", "3000", "--scope", "github.com"),
    ("prompt",),
    ("show", "--scope", "project:x"),
    ("show", "--kind", "lesson", "--json"),
    ("show", "--digest"),
)


def _outputs(
    capfd: pytest.CaptureFixture[str], path: Path, now: str | None = NOW
) -> list[tuple[str, str]]:
    """Each command's output and what it reports (`show` writes bytes to stdout's buffer:
    captured at the fd), at `now` (None: the clock's)."""
    outs = []
    at = [] if now is None else ["--now", now]
    for cmd, *rest in COMMANDS:
        assert main([cmd, str(path), *at, *rest]) == 0
        sys.stdout.flush()
        sys.stdout.buffer.flush()
        out, err = capfd.readouterr()
        assert out.strip() not in ("", "[]")
        outs.append((out, err))
    return outs


@pytest.mark.slow
def test_show_and_prompt_answer_from_the_store_as_from_the_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    fresh = tmp_path / "fresh"

    first = _outputs(capfd, path)
    store = StateDir(state / "memsync").view_store(path)
    assert store.exists()
    assert _outputs(capfd, path) == first  # warm: from the store
    with open(path, "ab") as f:  # a tombstone, a bad line, a line of a CRLF editor
        f.write(b'{"id": "e00007", "deleted": true, "created_at": "2026-11-02T00:00:00Z"}\n')
        f.write(b'{"id": "e00008", "kind": "fact"\n')
        f.write(
            b'{"id": "e00009", "kind": "fact", "text": "crlf", "created_at": "2026-11-04T00:00:00Z"}\r\n'
        )
    assert main(["add", str(path), "--kind", "fact", "--text", "late", "--scope", "project:x"]) == 0
    capfd.readouterr()
    warm = _outputs(capfd, path)
    monkeypatch.setenv("XDG_STATE_HOME", str(fresh))
    assert warm == _outputs(capfd, path)
    assert warm != first


@pytest.mark.slow
def test_the_first_command_after_compact_resumes_from_the_store_it_left(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memsync compact` writes the new file's store (issue 20): the next command folds
    nothing, and answers as with no state at all."""
    path = _file(tmp_path)
    with open(path, "ab") as f:  # what the compaction drops: a tombstone, an old version
        f.write(b'{"id": "e00007", "deleted": true, "created_at": "2026-11-02T00:00:00Z"}\n')
        f.write(
            b'{"id": "e00011", "kind": "fact", "text": "again", "scope": "project:x", '
            b'"created_at": "2026-11-03T00:00:00Z"}\n'
        )
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    _outputs(capfd, path)
    old_ino = path.stat().st_ino
    args = ["--quiet-seconds", "0", "--horizon-days", "0", "--grace-seconds", "0"]
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "none.toml"))  # no configured memory
    assert main(["compact", str(path), *args]) == 0
    capfd.readouterr()
    assert path.stat().st_ino != old_ino
    store = ViewStore(StateDir(state / "memsync"))
    fd = open_for_reading(path)
    try:
        resumed = store.resume(path, fd, str(path))
    finally:
        os.close(fd)
    assert resumed is not None
    assert resumed.offset == path.stat().st_size  # nothing left to fold
    after = _outputs(capfd, path)
    # At the clock's now too: the quick part the compaction wrote holds the entries live
    # at its own clock, so a `--now` before it is folded instead; this is answered by it.
    clock = _outputs(capfd, path, None)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    assert after == _outputs(capfd, path)
    assert clock == _outputs(capfd, path, None)


def _file(tmp_path: Path) -> Path:
    """3,000 entries of three kinds and scopes, larger than a store's threshold."""
    path = tmp_path / "me.jsonl"

    def confidence(i: int) -> int:
        """Tenths: the most confident entries are the oldest, so that a block that ranked
        by anything but confidence first would hold others."""
        return 9 if i < 300 else i % 5 + 1

    scopes = ("global", "github.com", "project:x")
    kinds = ("fact", "lesson", "preference")
    body = b"".join(
        b'{"id": "e%05d", "kind": "%s", "text": "entry number %d about builds", '
        b'"scope": "%s", "confidence": 0.%d, "created_at": "2026-11-%02dT%02d:%02d:00Z"}\n'
        % (
            i,
            kinds[i % 3].encode(),
            i,
            scopes[i % 7 % 3].encode(),
            confidence(i),
            1 + i // 1440,
            i // 60 % 24,
            i % 60,
        )
        for i in range(3000)
    )
    path.write_bytes(HEADER + body)
    assert path.stat().st_size > MIN_BYTES  # large enough to get a store
    return path
