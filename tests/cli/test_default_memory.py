"""One default memory for a newcomer without a config (issue 24, item 17).

The daemon's embedded default used `memory.jsonl` while the tour, the session-start hook
and `memsync mcp --memory me` used `me.jsonl`; `memsync sync` refused where the daemon ran.
Now every command agrees on the memory "me" at `~/.local/share/agent-memory/me.jsonl`, and
a machine whose daemon ran on the old default keeps the file it wrote.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from memsync import Memory
from memsync.cli import main
from memsync.cli._agents import _memory_path
from memsync.cli._hubs import describe_start
from memsync.config import default_config, default_config_path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A newcomer's home: no config file anywhere."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    return home


def _agent_memory(home: Path, name: str) -> Path:
    return home / ".local" / "share" / "agent-memory" / name


def _mcp_memory(memory: str | None) -> tuple[Path, str]:
    return _memory_path(argparse.Namespace(file=None, memory=memory, config=None))


def test_every_command_uses_the_memory_me(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    me = _agent_memory(home, "me.jsonl")
    [memory] = default_config().memory  # the daemon's embedded default
    assert (memory.name, memory.path) == ("me", me)
    assert _mcp_memory("me") == (me, "me")  # `memsync mcp --memory me` (was refused)
    assert _mcp_memory(None) == (me, "me")
    Memory.open(me).add("preference", "Short answers.", source="user")  # the tour's F
    assert main(["prompt", "--memory", "me"]) == 0
    assert "Short answers." in capsys.readouterr().out
    assert main(["prompt"]) == 0
    assert "Short answers." in capsys.readouterr().out


def test_sync_without_a_config_runs_the_daemons_embedded_default(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sync"]) == 0  # was: exit 2, "no config file"
    out = capsys.readouterr().out
    assert "nothing to sync: no remote is configured" in out
    assert f"no config file at {default_config_path()}: running on the embedded default" in out
    assert "[[remote]]" in out
    assert main(["sync", "--memory", "me"]) == 0


def test_the_hook_prints_nothing_on_a_missing_or_empty_memory(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    me = _agent_memory(home, "me.jsonl")
    assert main(["prompt", "--memory", "me", "--scope", "project:x"]) == 0
    assert capsys.readouterr() == ("", "")
    assert not me.exists()  # a read creates nothing
    Memory.open(me)
    assert main(["prompt", "--memory", "me", "--scope", "project:x"]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_memory_the_default_lacks_is_one_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prompt", "--memory", "work"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no memory named 'work'" in err
    assert "the embedded default has one memory, 'me'" in err


def test_the_former_default_file_is_kept_when_it_is_the_only_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    former = _agent_memory(home, "memory.jsonl")
    Memory.open(former).add("fact", "Written by a daemon of the old default.")
    [memory] = default_config().memory
    assert (memory.name, memory.path) == ("me", former)
    assert _mcp_memory("me") == (former, "me")
    assert main(["prompt", "--memory", "me"]) == 0
    assert "old default" in capsys.readouterr().out
    said = "\n".join(describe_start(default_config(), None, default_config_path()))
    assert f"watching {former} (memory 'me'" in said
    assert f"kept in {former}, the former default file" in said


def test_both_files_the_new_one_wins_and_the_old_one_is_named(home: Path) -> None:
    former, me = _agent_memory(home, "memory.jsonl"), _agent_memory(home, "me.jsonl")
    Memory.open(former)
    Memory.open(me)
    [memory] = default_config().memory
    assert memory.path == me
    said = "\n".join(describe_start(default_config(), None, default_config_path()))
    assert f"memsync merge {former} --into {me}" in said
