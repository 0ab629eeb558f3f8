"""`memsync status` shows each bridge the daemon syncs (its last sync and how it went), and
a refused one is a problem at once: a real daemon, one bridge that syncs (an AGENTS.md)
and one it must refuse (the Claude Code auto memory of a project Claude never ran in, so
there is no folder to find)."""

from __future__ import annotations

import json
import subprocess

import pytest

from memsync.daemon.status import DaemonStatus
from tests.helpers.daemons import Cluster, memsync, wait_for

pytestmark = pytest.mark.slow


def test_status_lists_the_bridges_and_a_refused_one_is_a_problem(cluster: Cluster) -> None:
    node = cluster.folder_node("a", cluster.hub())
    repo = node.root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    agents = repo / "AGENTS.md"
    agents.write_text("# Web app\n")
    (node.home / ".claude" / "projects").mkdir(parents=True)  # Claude never ran in repo
    bridges = "".join(
        f'\n[[bridge]]\nmemory = "m"\npath = {json.dumps(str(path))}\nformat = "{fmt}"\n'
        for path, fmt in ((agents, "agents-md"), (repo, "claude-auto-memory"))
    )
    node.config.parent.mkdir(parents=True, exist_ok=True)
    node.config.write_text(node.config_text() + bridges)
    node.start()

    def synced() -> DaemonStatus | None:
        st = node.status()
        done = st is not None and all(b.last_sync for b in st.bridges.values())
        return st if done else None

    st = wait_for(synced, "both bridges synced once")
    assert st.bridges[str(agents)].refused is None
    assert "Claude" in (st.bridges[str(repo)].refused or "")
    done = memsync("status", "--config", str(node.config), "--cached")
    assert done.returncode == 1, done.stdout
    lines = done.stdout.splitlines()
    ok = next(x for x in lines if x.startswith(f"bridge {agents} "))
    assert ok.startswith(f"bridge {agents} (agents-md, memory m): last sync 20")
    assert ok.endswith(", ok")
    assert any(x.startswith(f"bridge {repo} (claude-auto-memory") and "REFUSED" in x for x in lines)
    assert f"problem: bridge {repo}: refused: " in done.stdout
    doc = json.loads(memsync("status", "--config", str(node.config), "--cached", "--json").stdout)
    assert doc["status"]["bridges"][str(agents)]["refused"] is None
    assert node.stop() == 0
