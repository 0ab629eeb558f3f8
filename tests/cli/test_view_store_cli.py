"""`show` and `prompt` answer from the persistent view in the state directory (issue 20):
the same output as with no state at all, before and after an append, and a store there."""

from __future__ import annotations

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


def _outputs(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    outs = []
    for cmd, *rest in COMMANDS:
        assert main([cmd, str(path), "--now", NOW, *rest]) == 0
        outs.append(capsys.readouterr().out)
    return outs


@pytest.mark.slow
def test_show_and_prompt_answer_from_the_store_as_from_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "me.jsonl"
    scopes = ("global", "github.com", "project:x")
    kinds = ("fact", "lesson", "preference")
    body = b"".join(
        b'{"id": "e%05d", "kind": "%s", "text": "entry number %d about builds", '
        b'"scope": "%s", "confidence": 0.%d, "created_at": "2026-11-01T%02d:%02d:00Z"}\n'
        % (i, kinds[i % 3].encode(), i, scopes[i % 7 % 3].encode(), i % 9 + 1, i // 60 % 24, i % 60)
        for i in range(3000)
    )
    path.write_bytes(HEADER + body)
    assert path.stat().st_size > MIN_BYTES  # large enough to get a store
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    fresh = tmp_path / "fresh"

    first = _outputs(capsys, path)
    store = StateDir(state / "memsync").view_store(path)
    assert store.exists()
    assert _outputs(capsys, path) == first  # warm: from the store
    with open(path, "ab") as f:
        f.write(b'{"id": "e00007", "deleted": true, "created_at": "2026-11-02T00:00:00Z"}\n')
    assert main(["add", str(path), "--kind", "fact", "--text", "late", "--scope", "project:x"]) == 0
    capsys.readouterr()
    warm = _outputs(capsys, path)
    monkeypatch.setenv("XDG_STATE_HOME", str(fresh))
    assert warm == _outputs(capsys, path)
    assert warm != first
