"""Bridges end to end (issue 22, item 5): two machines (real daemons) and a folder hub.
A memory Claude Code's auto memory writes on A reaches B's AGENTS.md and CLAUDE.md blocks
and B's auto-memory folder; a line the person deletes in B's block disappears on A; a
block an agent rewrote away on B deletes nothing anywhere; text outside the blocks is
byte-identical throughout; kill -9 of a daemon leaves every bridged file whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memsync.core.bridge_block import END, locate
from memsync.local.reading import view_of
from tests.helpers.bridges import claude_project
from tests.helpers.daemons import Cluster, Node, start_all, wait_for

pytestmark = pytest.mark.slow

AGENTS = "# Web app\n\nRun `make lint` before committing.\n"
CLAUDE = "# My own notes\n\n- Answer in English.\n"
FACT = "Deploys go out on Tuesdays only."
MEMORY_FILE = f"""\
---
name: Deploy day
description: Deploys go out on Tuesdays only
type: project
---

{FACT}
"""


def _machine(cluster: Cluster, name: str, hub: Path, *, memories: bool) -> Node:
    node = cluster.folder_node(name, hub)
    repo = node.root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "AGENTS.md").write_text(AGENTS)
    claude = node.home / ".claude"
    claude.mkdir(parents=True)
    (claude / "CLAUDE.md").write_text(CLAUDE)
    claude_project(claude, repo, memories=memories)
    tables = "".join(
        f'\n[[bridge]]\nmemory = "m"\npath = {json.dumps(str(path))}\nformat = "{fmt}"\n'
        for path, fmt in (
            (repo / "AGENTS.md", "agents-md"),
            (claude / "CLAUDE.md", "claude-md"),
            (repo, "claude-auto-memory"),
        )
    )
    node.config.parent.mkdir(parents=True, exist_ok=True)
    node.config.write_text(node.config_text() + tables)
    return node


def _memory_folder(node: Node) -> Path:
    [folder] = (node.home / ".claude" / "projects").glob("*/memory")
    return folder


def _outside(path: Path) -> str | None:
    text = path.read_text()
    span = locate(text)  # exactly one whole block, or BlockError
    return None if span is None else text[: span.start] + text[span.stop :]


def _texts(node: Node) -> list[str]:
    return [r.fields()["text"] for r in view_of([node.memory]).records]


def test_a_claude_memory_on_a_reaches_bs_bridges_and_bs_deletion_reaches_a(
    cluster: Cluster,
) -> None:
    hub = cluster.hub()
    a = _machine(cluster, "a", hub, memories=True)
    b = _machine(cluster, "b", hub, memories=False)
    start_all(a, b)
    b_agents, b_claude = b.root / "repo" / "AGENTS.md", b.home / ".claude" / "CLAUDE.md"

    # Claude Code's auto memory writes a memory on A.
    (_memory_folder(a) / "project_deploys.md").write_text(MEMORY_FILE)
    wait_for(lambda: FACT in b_agents.read_text(), "A's Claude memory in B's AGENTS.md")
    wait_for(lambda: FACT in b_claude.read_text(), "... in B's CLAUDE.md")
    wait_for(
        lambda: any(FACT in p.read_text() for p in _memory_folder(b).glob("memsync_*.md")),
        "... in B's auto-memory folder",
    )
    # Claude's other memories (the docs' examples on A) came along, and nothing twice.
    assert "Integration tests must use a real database" in b_agents.read_text()
    assert b_agents.read_text().count(FACT) == 1
    assert _outside(b_agents) == AGENTS
    assert _outside(b_claude) == CLAUDE

    # The person deletes the line in B's AGENTS.md block: gone on A too.
    text = b_agents.read_text()
    line = next(x for x in text.splitlines() if FACT in x)
    b_agents.write_text(text.replace(line + "\n", ""))
    wait_for(lambda: FACT not in _texts(a), "B's deletion to reach A")
    a_agents = a.root / "repo" / "AGENTS.md"
    wait_for(lambda: FACT not in a_agents.read_text(), "... and A's AGENTS.md block")
    wait_for(lambda: FACT not in b_claude.read_text(), "... and B's CLAUDE.md block")
    deploys = _memory_folder(a) / "project_deploys.md"
    wait_for(lambda: not deploys.exists(), "... and Claude's own memory file on A")
    assert FACT not in _texts(b)

    # An agent rewrites B's CLAUDE.md without the block: no deletion anywhere.
    count = len(_texts(a))
    b_claude.write_text("# Rewritten by an agent\n- Keep answers short.\n")
    wait_for(lambda: END in b_claude.read_text(), "the block rendered again on B")
    assert _outside(b_claude) == "# Rewritten by an agent\n- Keep answers short.\n"
    assert len(_texts(a)) == count
    assert len(_texts(b)) == count

    # kill -9 while A's daemon is busy: every bridged file stays whole.
    for n in range(5):
        (_memory_folder(a) / f"project_more_{n}.md").write_text(
            MEMORY_FILE.replace(FACT, f"Extra fact number {n}.")
        )
    a.kill()
    for path in (a_agents, a.home / ".claude" / "CLAUDE.md", b_agents):
        assert _outside(path) is not None  # one whole block
    assert _outside(a_agents) == AGENTS
    assert b.stop() == 0
