"""Which changes the daemon takes as calling for a sync of a memory's bridges (issue 22,
item 5): a bridged file whose name starts with a dot (`.cursorrules`, `.windsurfrules`,
`.clinerules`) is the person's file, not a temp file."""

from __future__ import annotations

from pathlib import Path

from memsync.config import load_config
from memsync.daemon._bridges import Bridges


def test_a_dotted_bridged_file_calls_for_a_sync_and_a_temp_file_does_not(tmp_path: Path) -> None:
    rules = tmp_path / ".cursorrules"
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[memory]]\nname = "me"\npath = "{tmp_path}/me.jsonl"\n'
        f'[[bridge]]\nmemory = "me"\npath = "{rules}"\nformat = "markdown"\n'
    )
    bridges = Bridges(load_config(config), "m1")
    assert bridges.wanted(str(rules))
    assert bridges.memories_of({rules}) == {"me"}
    assert bridges.memories_of({tmp_path / ".cursorrules.memsync-12-ab12cd34"}) == set()
    assert bridges.memories_of({tmp_path / ".notes.md"}) == set()
