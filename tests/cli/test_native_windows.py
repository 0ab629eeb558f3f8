"""Native Windows is refused at start with one line pointing to WSL2 (issue 23): the
command line (every command, the daemon and the MCP server included) and the daemon's own
entry. The platform is faked; WSL itself is Linux and runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memsync.cli import main
from memsync.config import load_config
from memsync.daemon.service import Daemon
from memsync.errors import MemsyncError
from memsync.local.platforms import NATIVE_WINDOWS


@pytest.mark.parametrize("fake", ["platform", "os.name"])
@pytest.mark.parametrize("argv", [["show"], ["daemon"], ["mcp"], ["status"]])
def test_the_command_line_refuses_native_windows(
    fake: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if fake == "platform":
        monkeypatch.setattr(sys, "platform", "win32")
    else:
        monkeypatch.setattr(os, "name", "nt")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"memsync: {NATIVE_WINDOWS}\n"
    assert "WSL2" in err


def test_the_daemon_refuses_native_windows_before_touching_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_path = tmp_path / "config.toml"
    state = tmp_path / "state"
    config_path.write_text(
        f'state_dir = "{state}"\n[[memory]]\nname = "me"\npath = "{tmp_path / "me.jsonl"}"\n',
        encoding="utf-8",
    )
    daemon = Daemon(load_config(config_path), config_path)
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(MemsyncError, match="WSL2"):
        daemon.run()
    assert not state.exists()
