"""`show` and `prompt` answer from the persistent view in the state directory (issue 20):
the same output as with no state at all, before and after an append, and a store there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memsync.cli import main
from memsync.local.statedir import StateDir
from memsync.local.viewstore import MIN_BYTES

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}\n'
NOW = "2026-12-01T00:00:00Z"
COMMANDS = (
    ("prompt", "--max-chars", "3000", "--scope", "github.com"),
    ("prompt",),
    ("show", "--scope", "project:x"),
    ("show", "--kind", "lesson", "--json"),
    ("show", "--digest"),
)


def _outputs(capfd: pytest.CaptureFixture[str], path: Path) -> list[str]:
    """Each command's output (`show` writes bytes to stdout's buffer: captured at the fd)."""
    outs = []
    for cmd, *rest in COMMANDS:
        assert main([cmd, str(path), "--now", NOW, *rest]) == 0
        sys.stdout.flush()
        sys.stdout.buffer.flush()
        out = capfd.readouterr().out
        assert out.strip() not in ("", "[]")
        outs.append(out)
    return outs


@pytest.mark.slow
def test_show_and_prompt_answer_from_the_store_as_from_the_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
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
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    fresh = tmp_path / "fresh"

    first = _outputs(capfd, path)
    store = StateDir(state / "memsync").view_store(path)
    assert store.exists()
    assert _outputs(capfd, path) == first  # warm: from the store
    with open(path, "ab") as f:
        f.write(b'{"id": "e00007", "deleted": true, "created_at": "2026-11-02T00:00:00Z"}\n')
    assert main(["add", str(path), "--kind", "fact", "--text", "late", "--scope", "project:x"]) == 0
    capfd.readouterr()
    warm = _outputs(capfd, path)
    monkeypatch.setenv("XDG_STATE_HOME", str(fresh))
    assert warm == _outputs(capfd, path)
    assert warm != first
