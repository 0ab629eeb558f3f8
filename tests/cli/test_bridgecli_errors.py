"""`memsync bridge sync` with one broken bridge among several (issue 22): each bridge is
synced and reported, the broken one refused with its reason, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.cli import main
from memsync.local.memory import Memory


def test_a_symlink_loop_does_not_stop_the_other_bridges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / ".state"))
    Memory.open(tmp_path / "me.jsonl").add("fact", "Staging needs the VPN.")
    (tmp_path / "loop1.md").symlink_to("loop2.md")
    (tmp_path / "loop2.md").symlink_to("loop1.md")
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# Project\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[memory]]\nname = "me"\npath = "{tmp_path}/me.jsonl"\n'
        f'[[bridge]]\nmemory = "me"\npath = "{tmp_path}/loop1.md"\nformat = "agents-md"\n'
        f'[[bridge]]\nmemory = "me"\npath = "{agents}"\nformat = "agents-md"\n'
    )
    code = main(["bridge", "sync", "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{tmp_path}/loop1.md: REFUSED:" in out
    assert "symbolic links" in out
    assert "Staging needs the VPN." in agents.read_text()  # the other bridge was synced
    assert f"{agents}: written" in out
