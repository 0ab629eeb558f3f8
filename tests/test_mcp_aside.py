"""A running MCP server recovers what a compaction killed after its start left aside
(rule 16; issue 24, residual (a)): at its next request, not only when it starts. Through
the SDK's in-process client; the state as a killed compaction leaves it
(tests.helpers.aside)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import TextResourceContents

from memsync.local.statedir import StateDir
from memsync.mcp_server import build_server
from tests.helpers.aside import leave_aside
from tests.helpers.records import entry

LATE = entry("late00000001", 100, text="Appended while the compaction ran.") + b"\n"


@pytest.mark.parametrize("request_kind", ["recall", "prompt", "remember"])
def test_a_running_server_recovers_the_lines_left_aside_at_its_next_request(
    tmp_path: Path, request_kind: str
) -> None:
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    async def scenario() -> None:
        async with Client(server) as client:
            r = await client.call_tool("remember", {"kind": "fact", "text": "Kept by it."})
            assert not r.is_error
            r = await client.call_tool("recall", {"query": "appended"})  # warm its caches
            assert r.structured_content is not None
            assert r.structured_content["entries"] == []
            aside = leave_aside(path, LATE)
            if request_kind == "recall":
                r = await client.call_tool("recall", {"query": "appended"})
                assert r.structured_content is not None
                assert [e["id"] for e in r.structured_content["entries"]] == ["late00000001"]
            elif request_kind == "prompt":
                res = await client.read_resource("memsync://me/prompt/global")
                [block] = res.contents
                assert isinstance(block, TextResourceContents)
                assert "Appended while the compaction ran." in block.text
            else:
                r = await client.call_tool("remember", {"kind": "fact", "text": "After it."})
                assert not r.is_error
            assert not aside.exists()
            assert path.read_bytes().count(LATE) == 1

    anyio.run(scenario)
