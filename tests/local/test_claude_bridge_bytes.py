"""Claude's `MEMORY.md` is the person's and Claude's bytes (issue 22): memsync never
rewrites what it cannot read."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memsync.core.bridge_block import Selection
from memsync.local.bridges import Bridge, BridgeResult
from memsync.local.claude_bridge import sync_claude_bridge
from memsync.local.memory import Memory
from tests.helpers.bridges import claude_project


def test_a_memory_index_not_utf8_is_left_as_it_is(tmp_path: Path) -> None:
    repo = tmp_path / "src" / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    claude = tmp_path / ".claude"
    folder = claude_project(claude, repo)
    index = folder / "MEMORY.md"
    original = index.read_bytes() + b"- Caf\xe9 notes (typed in Latin-1)\n"
    index.write_bytes(original)
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("avoid", "Never force-push main.")
    res = sync_claude_bridge(
        mem.path,
        Bridge(repo, "claude-auto-memory", Selection()),
        machine="m1",
        state_dir=tmp_path / "state",
        claude_dir=claude,
    )
    assert index.read_bytes() == original  # no byte turned into U+FFFD
    assert res.refused is not None
    assert "MEMORY.md" in res.refused


def test_a_line_of_memory_md_is_a_markdown_line(tmp_path: Path) -> None:
    """Pointers to memsync's files are dropped outside its block line by line, and a line
    is what Markdown reads as one ("\\n", "\\r\\n", "\\r"), not what `str.splitlines` also
    breaks at (U+2028, NEL, form feed): a person's line holding one is kept whole."""
    repo = tmp_path / "src" / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    claude = tmp_path / ".claude"
    folder = claude_project(claude, repo)
    index = folder / "MEMORY.md"
    line = "- See the notes\u2028- [old](memsync_abc.md) kept as I wrote it\n"
    index.write_bytes(index.read_bytes() + line.encode("utf-8"))
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("avoid", "Never force-push main.")
    res = sync_claude_bridge(
        mem.path,
        Bridge(repo, "claude-auto-memory", Selection()),
        machine="m1",
        state_dir=tmp_path / "state",
        claude_dir=claude,
    )
    assert res.refused is None
    assert line in index.read_text(encoding="utf-8")


def test_a_memory_file_not_utf8_is_left_as_it_is_and_the_others_sync(tmp_path: Path) -> None:
    """One of Claude's topic files that is not UTF-8 (typed in Latin-1, say) is read by
    nobody: not taken in, not written over, not deleted, and named in a note; Claude's
    other files come in and memsync's go out as usual. The same for one of memsync's own
    files edited into bytes memsync cannot read: the edit is kept."""
    repo = tmp_path / "src" / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    claude = tmp_path / ".claude"
    folder = claude_project(claude, repo)
    bad = folder / "cafe_notes.md"
    latin1 = b"---\nname: Caf\xe9\ntype: user\n---\n\nThe caf\xe9 closes at six.\n"
    bad.write_bytes(latin1)
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("avoid", "Never force-push main.")
    bridge = Bridge(repo, "claude-auto-memory", Selection())

    def sync() -> BridgeResult:
        return sync_claude_bridge(
            mem.path, bridge, machine="m1", state_dir=tmp_path / "state", claude_dir=claude
        )

    res = sync()
    assert res.refused is None
    assert any("cafe_notes.md" in n and "not UTF-8" in n for n in res.notes)
    assert bad.read_bytes() == latin1
    texts = {e.text for e in mem.view().entries}
    assert any(t.startswith("The user is a senior backend engineer") for t in texts)
    assert not any("caf" in t for t in texts)
    [ours] = sorted(folder.glob("memsync_*.md"))
    edited = ours.read_bytes().replace(b"force-push", b"force-push (d\xe9j\xe0 vu)")
    ours.write_bytes(edited)
    assert sync().refused is None
    assert ours.read_bytes() == edited  # not written over
    assert bad.read_bytes() == latin1
