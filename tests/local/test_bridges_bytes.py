"""A bridged file's bytes as its reader takes them (issue 22): Codex's 32 KiB counts the
file's line endings as written, and a byte order mark stays the file's first bytes."""

from __future__ import annotations

import json
from pathlib import Path

from memsync.core.bridge_block import BEGIN
from memsync.local.bridges import Bridge, remove_block, sync_bridge
from memsync.local.memory import Memory


def _many(tmp_path: Path, n: int) -> Memory:
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "seed")
    with open(mem.path, "a", encoding="utf-8") as f:
        for i in range(n):
            rec = {"id": f"x{i}", "kind": "fact", "text": f"A fact number {i}."}
            f.write(json.dumps({**rec, "created_at": "2026-01-01T00:00:00Z"}) + "\n")
    return mem


def test_a_crlf_agents_md_stays_within_codex_budget(tmp_path: Path) -> None:
    mem = _many(tmp_path, 1500)
    agents = tmp_path / "AGENTS.md"
    own = b"Own line.\r\n" * 100
    agents.write_bytes(own)
    res = sync_bridge(mem.path, Bridge(agents, "agents-md"), machine="m", state_dir=tmp_path / "s")
    assert res.refused is None
    assert res.written
    data = agents.read_bytes()
    assert len(data) <= 32 * 1024  # Codex stops reading there: the end marker would be cut
    assert data.endswith(own)
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_a_byte_order_mark_stays_first(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "Staging needs the VPN.")
    rules = tmp_path / "AGENTS.md"
    original = b"\xef\xbb\xbf# Title\n\nBody.\n"
    rules.write_bytes(original)
    res = sync_bridge(mem.path, Bridge(rules, "agents-md"), machine="m", state_dir=tmp_path / "s")
    assert res.written
    data = rules.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf" + BEGIN.encode())  # "# Title" still a heading
    assert data.count(b"\xef\xbb\xbf") == 1
    assert remove_block(rules, state_dir=tmp_path / "s")
    assert rules.read_bytes() == original


def test_a_memory_file_is_never_bridged(tmp_path: Path) -> None:
    """A JSON Lines memory file given as a bridge (a memory of another config, a hub file):
    a block at its top would push its header down and add two bad lines (rule 2)."""
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "Staging needs the VPN.")
    other = Memory.open(tmp_path / "other.jsonl")
    other.add("fact", "Another memory.")
    headerless = tmp_path / "plain.jsonl"
    headerless.write_bytes(other.path.read_bytes().split(b"\n", 1)[1])
    for path in (other.path, headerless):
        before = path.read_bytes()
        res = sync_bridge(
            mem.path, Bridge(path, "agents-md"), machine="m", state_dir=tmp_path / "s"
        )
        assert res.refused is not None
        assert "memory file" in res.refused
        assert path.read_bytes() == before
