"""How `memsync mcp` starts its server (`mcp_server.start`), in a process of its own: what
it does to the whole process is not done to the test's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

_STARTED = """
import gc, sys
from pathlib import Path
from memsync.local.statedir import StateDir
from memsync.mcp_server import start
start(Path(sys.argv[1]), "me", StateDir(Path(sys.argv[2])))
print(gc.get_freeze_count())
"""


def test_a_started_server_puts_its_modules_out_of_the_collectors_reach(tmp_path: Path) -> None:
    """Issue 20 (each call under 20 ms at p99): the objects alive once the server is
    built (the SDK's modules: some 90,000) are frozen (`gc.freeze`), so that a
    full collection during a call does not walk them all."""
    path, state = tmp_path / "me.jsonl", tmp_path / "state"
    done = subprocess.run(
        [sys.executable, "-c", _STARTED, str(path), str(state)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert int(done.stdout.split()[-1]) > 10_000, done.stdout + done.stderr
