"""`memsync bridge add | list | remove | sync` from the command line (issue 22): the
config's `[[bridge]]` tables, one-line errors naming the key, and `remove` leaving the
file as it was without the block."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memsync.cli import main
from memsync.config import load_config
from memsync.core.bridge_block import BEGIN, END
from memsync.local.memory import Memory
from tests.helpers.bridges import claude_project

PERSON = "# Project\n\nRun `make lint` before committing.\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / ".state"))
    return tmp_path


@pytest.fixture
def config(home: Path) -> Path:
    path = home / "config.toml"
    path.write_text(f'# my memsync config\n[[memory]]\nname = "me"\npath = "{home}/me.jsonl"\n')
    mem = Memory.open(home / "me.jsonl")
    mem.add("preference", "Use uv, not pip.", source="user")
    mem.add("fact", "Staging needs the VPN.", scope="project:web")
    return path


def test_add_sync_list_remove_round_trip(
    config: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = home / "AGENTS.md"
    agents.write_text(PERSON)
    before = config.read_text()
    code = main(
        [
            "bridge",
            "add",
            str(agents),
            "--format",
            "agents-md",
            "--scope",
            "project:web",
            "--budget",
            "40 lines",
            "--config",
            str(config),
        ]
    )
    assert code == 0
    [bridge] = load_config(config).bridge
    assert (bridge.path, bridge.format, bridge.scope, bridge.budget) == (
        agents,
        "agents-md",
        "project:web",
        "40 lines",
    )
    assert config.read_text().startswith(before)  # the person's config kept as it was
    text = agents.read_text()
    assert text.startswith(BEGIN)
    assert "- Fact: \\[project:web\\] Staging needs the VPN." in text
    assert text.endswith(END + "\n" + PERSON)
    out = capsys.readouterr().out
    assert "written" in out

    assert main(["bridge", "list", "--config", str(config), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"memory": "me", "format": "agents-md", "path": str(agents), "state": "block"}]

    agents.write_text(text.replace("Staging needs the VPN.", "Staging needs the VPN and 2FA."))
    assert main(["bridge", "sync", "--config", str(config)]) == 0
    assert "2 record(s) from edits" in capsys.readouterr().out
    texts = sorted(e.text for e in Memory.open(home / "me.jsonl").view().entries)
    assert texts == ["Staging needs the VPN and 2FA.", "Use uv, not pip."]

    assert main(["bridge", "remove", str(agents), "--config", str(config)]) == 0
    assert agents.read_text() == PERSON
    assert config.read_text() == before
    assert load_config(config).bridge == ()


def test_sync_reports_a_refused_file_and_exits_1(
    config: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = home / "AGENTS.md"
    agents.write_text(PERSON + BEGIN + "\n")
    assert (
        main(["bridge", "add", str(agents), "--format", "agents-md", "--config", str(config)]) == 1
    )
    out = capsys.readouterr().out
    assert f"{agents}: REFUSED: {agents}: " in out
    assert "no end marker" in out
    assert agents.read_text() == PERSON + BEGIN + "\n"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'memory = "mee"\npath = "/x/AGENTS.md"\nformat = "agents-md"\n',
            "bridge[0].memory: no [[memory]] is named 'mee' (did you mean 'me'?)",
        ),
        (
            'memory = "me"\npath = "/x/AGENTS.md"\nformat = "agentsmd"\n',
            "bridge[0].format: must be",
        ),
        (
            'memory = "me"\npath = "/x/AGENTS.md"\nformat = "agents-md"\nbudget = "3 pages"\n',
            "bridge[0].budget: budget '3 pages'",
        ),
        (
            'memory = "me"\npath = "/x/AGENTS.md"\nformat = "agents-md"\nkinds = ["facts"]\n',
            "bridge[0].kinds[0]: unknown kind 'facts'",
        ),
        (
            'memory = "me"\npath = "AGENTS.md"\nformat = "agents-md"\n',
            "bridge[0].path: 'AGENTS.md' is not an absolute path",
        ),
        (
            'memory = "me"\npath = "/x/AGENTS.md"\nformat = "agents-md"\ncolour = 1\n',
            "bridge[0].colour: unknown key 'colour'",
        ),
    ],
)
def test_a_bad_bridge_table_is_one_line_naming_the_key(
    config: Path, table: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(config.read_text() + "\n[[bridge]]\n" + table)
    assert main(["bridge", "sync", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"memsync: {config}: {message}" in err


def test_add_refuses_a_bad_table_and_leaves_the_config(
    config: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = config.read_text()
    code = main(
        [
            "bridge",
            "add",
            str(home / "AGENTS.md"),
            "--format",
            "agents-md",
            "--memory",
            "you",
            "--config",
            str(config),
        ]
    )
    assert code == 2
    assert "bridge[0].memory: no [[memory]] is named 'you'" in capsys.readouterr().err
    assert config.read_text() == before
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".config")) == []


def test_remove_of_an_unknown_bridge_is_a_usage_error(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bridge", "remove", "/nowhere/AGENTS.md", "--config", str(config)]) == 2
    assert "no [[bridge]] of /nowhere/AGENTS.md" in capsys.readouterr().err


def test_claude_auto_memory_through_the_cli(
    config: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = home / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    folder = claude_project(home / "claude", repo)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    code = main(
        ["bridge", "add", str(repo), "--format", "claude-auto-memory", "--config", str(config)]
    )
    assert code == 0
    assert len(list(folder.glob("memsync_*.md"))) == 1  # the global entry (no --scope)
    texts = {e.text for e in Memory.open(home / "me.jsonl").view().entries}
    assert "Integration tests must use a real database, never mocks." in " ".join(texts)
    capsys.readouterr()
    assert main(["bridge", "remove", str(repo), "--config", str(config)]) == 0
    assert "1 memory file(s)" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_add_refuses_a_claude_md_that_would_hide_agents_md(
    config: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = home / "web"
    project.mkdir()
    (project / "AGENTS.md").write_text(PERSON)
    before = config.read_text()
    claude = project / "CLAUDE.md"
    assert (
        main(["bridge", "add", str(claude), "--format", "claude-md", "--config", str(config)]) == 2
    )
    assert "Claude Code stops reading AGENTS.md" in capsys.readouterr().err
    assert not claude.exists()
    assert config.read_text() == before
