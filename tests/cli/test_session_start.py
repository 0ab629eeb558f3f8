"""The README's agent set-up, run as written: the SessionStart hook's command and the
`mcpServers` entry a host launches (issue 10's session-start recipe)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memsync import Memory
from tests.helpers.paths import README

DEFAULT_FILE = "~/.local/share/agent-memory/me.jsonl"


def _json_blocks() -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    return [json.loads(b) for b in blocks]


def _env(tmp_path: Path) -> dict[str, str]:
    """A home of its own: the README's default paths land in `tmp_path`."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_STATE_HOME": str(tmp_path / ".local" / "state"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
    }


@pytest.mark.slow
def test_the_session_start_hook_prints_the_memory_block(tmp_path: Path) -> None:
    [settings] = [b for b in _json_blocks() if "hooks" in b]
    [entry] = settings["hooks"]["SessionStart"]
    [hook] = entry["hooks"]
    assert hook["type"] == "command"
    assert "--memory me" in hook["command"]  # the default memory, the tour's $F
    mem = Memory.open(Path(DEFAULT_FILE.replace("~", str(tmp_path))))
    mem.add("preference", "Short answers.", source="user")
    mem.add("lesson", "Run ruff before committing.", scope="project:memsync")
    mem.add("lesson", "Unrelated project lesson.", scope="project:other")
    done = subprocess.run(
        ["/bin/sh", "-c", hook["command"]],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Short answers." in done.stdout
    assert "Run ruff before committing." in done.stdout
    assert "Unrelated" not in done.stdout


def _hook_command() -> str:
    [settings] = [b for b in _json_blocks() if "hooks" in b]
    command: str = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    return command


@pytest.mark.slow
def test_the_hook_pasted_before_the_first_entry_prints_nothing(tmp_path: Path) -> None:
    """Issue 24, item 17: the recipe exited 2 until the memory file existed; an empty or
    missing memory is no error, and nothing to load."""
    memory = Path(DEFAULT_FILE.replace("~", str(tmp_path)))
    for step in ("missing", "empty"):
        if step == "empty":
            Memory.open(memory)
        done = subprocess.run(
            ["/bin/sh", "-c", _hook_command()],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), step


@pytest.mark.slow
def test_the_mcp_servers_entry_launches_a_working_server(tmp_path: Path) -> None:
    [hosts] = [b for b in _json_blocks() if "mcpServers" in b]
    server = hosts["mcpServers"]["memsync"]
    path = tmp_path / "mem" / "me.jsonl"
    config = tmp_path / ".config" / "memsync" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[[memory]]\nname = "me"\npath = "{path}"\n')
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=_env(tmp_path)
    )

    async def scenario() -> set[str]:
        async with Client(params, read_timeout_seconds=60) as client:
            r = await client.call_tool("remember", {"kind": "fact", "text": "Hosts work."})
            assert not r.is_error
            tools = await client.list_tools()
            return {t.name for t in tools.tools}

    assert anyio.run(scenario) == {"remember", "supersede", "forget", "recall"}
    assert [e.text for e in Memory(path).view().entries] == ["Hosts work."]
