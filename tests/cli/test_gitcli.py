"""`memsync git setup` and `memsync merge-driver` from the command line (issue 22, item 6):
what they write, and one-line errors with git's conflict exit (non-zero) for the driver."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memsync.cli import main

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}\n'
ENTRY = (
    b'{"id": "a1a1a1a1a1a1", "kind": "fact", "text": "x", "created_at": "2026-11-01T00:01:00Z"}\n'
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _config(root: Path, key: str) -> str:
    done = subprocess.run(
        ["git", "config", key], cwd=root, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_setup_defaults_to_the_configured_memories_in_the_repository(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[memory]]\nname = "team"\npath = "{repo}/agents/team.jsonl"\n'
        f'[[memory]]\nname = "me"\npath = "{tmp_path}/me.jsonl"\n'
    )
    (repo / ".gitattributes").write_bytes(b"*.png binary")
    (repo / "agents").mkdir()
    monkeypatch.chdir(repo / "agents")  # anywhere in the working tree
    assert main(["git", "setup", "--config", str(config)]) == 0
    assert (repo / ".gitattributes").read_bytes() == (
        b"*.png binary\n/agents/team.jsonl merge=memsync\n"
    )
    assert _config(repo, "merge.memsync.driver").endswith(" -m memsync merge-driver %O %A %B %P")
    assert _config(repo, "merge.memsync.name")
    before = (repo / ".gitattributes").read_bytes()
    assert main(["git", "setup", "--config", str(config), "--repo", str(repo)]) == 0
    assert (repo / ".gitattributes").read_bytes() == before


def test_setup_without_config_registers_every_jsonl(repo: Path) -> None:
    assert main(["git", "setup", "--repo", str(repo)]) == 0
    assert (repo / ".gitattributes").read_text() == "*.jsonl merge=memsync\n"


def test_setup_outside_a_repository_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "plain").mkdir()
    assert main(["git", "setup", "--repo", str(tmp_path / "plain")]) == 2
    err = capsys.readouterr().err
    assert err == f"memsync: {tmp_path / 'plain'}: not in a git repository\n"


def test_the_driver_writes_the_merge_into_ours(tmp_path: Path) -> None:
    base, ours, theirs = (tmp_path / n for n in ("o", "a", "b"))
    base.write_bytes(HEADER)
    ours.write_bytes(HEADER)
    theirs.write_bytes(HEADER + ENTRY)
    assert main(["merge-driver", str(base), str(ours), str(theirs), "m.jsonl"]) == 0
    assert ours.read_bytes() == HEADER + ENTRY


def test_the_driver_refuses_in_one_line_and_leaves_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, ours, theirs = (tmp_path / n for n in ("o", "a", "b"))
    base.write_bytes(HEADER)
    ours.write_bytes(HEADER + ENTRY)
    theirs.write_bytes(HEADER + b"[1, 2]\n")
    assert main(["merge-driver", str(base), str(ours), str(theirs), "m.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("memsync: merge-driver: m.jsonl (theirs):2: bad line")
    assert ours.read_bytes() == HEADER + ENTRY
    os.unlink(theirs)
    assert main(["merge-driver", str(base), str(ours), str(theirs), "m.jsonl"]) == 2
    assert capsys.readouterr().err == f"memsync: {theirs}: no such file or directory\n"
