"""memsync's own hub key is never memory text (issue 24, item 5): `add` and MCP `remember`
refuse it as `memsync key show` prints it, and the MCP server refuses this machine's keys
in base64 and hex too. Nothing is written."""

from __future__ import annotations

import base64
import contextlib
import io
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import TextContent

from memsync import Memory
from memsync.cli import main
from memsync.config.wiring import own_key_forms
from memsync.hub.keys import load_keyring
from memsync.local.statedir import StateDir
from memsync.mcp_server import build_server


@pytest.fixture
def printed_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A key made by `memsync key new`, as `memsync key show` prints it."""
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "cfg" / "config.toml"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["key", "new"]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["key", "show"]) == 0
    return out.getvalue().strip()


def test_add_refuses_the_key_as_key_show_prints_it(
    printed_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    me = tmp_path / "me.jsonl"
    text = f"the hub key is {printed_key}"
    assert main(["add", str(me), "--kind", "fact", "--text", text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memsync: refusing to store")
    assert "hub key" in err
    # Any memsync key, configured here or not, is a secret shape (`memsync check` too).
    other = "msk1-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9f"
    assert main(["add", str(me), "--kind", "fact", "--text", f"key {other}"]) == 2
    assert "(memsync hub key)" in capsys.readouterr().err
    assert printed_key not in err
    assert not me.exists() or printed_key.encode() not in me.read_bytes()


@pytest.mark.slow
def test_remember_refuses_this_machines_key_in_every_form(printed_key: str, tmp_path: Path) -> None:
    ring = load_keyring(tmp_path / "cfg" / "keys")
    key = ring.current
    forms = own_key_forms(None)
    assert printed_key in forms
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"), refused=forms)
    texts = [
        f"the hub key is {printed_key}",
        f"key body {printed_key.removeprefix('msk1-')}",
        f"in base64: {base64.b64encode(key).decode()}",
        f"in hex: {key.hex()}",
        f"IN HEX: {key.hex().upper()}",
    ]

    async def scenario() -> list[str]:
        replies = []
        async with Client(server) as client:
            for text in texts:
                r = await client.call_tool("remember", {"kind": "fact", "text": text})
                assert r.is_error, text
                block = r.content[0]
                assert isinstance(block, TextContent)
                replies.append(block.text)
            ok = await client.call_tool("remember", {"kind": "fact", "text": "Keys rotate yearly."})
            assert not ok.is_error
        return replies

    for reply in anyio.run(scenario):
        assert reply.startswith("memsync: refusing to store")
        assert key.hex() not in reply
    assert [e.text for e in Memory(path).view().entries] == ["Keys rotate yearly."]


def test_add_refuses_this_machines_key_in_base64_and_hex(
    printed_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = load_keyring(tmp_path / "cfg" / "keys").current
    me = tmp_path / "me.jsonl"
    for text in (f"b64 {base64.b64encode(key).decode()}", f"hex {key.hex()}"):
        assert main(["add", str(me), "--kind", "fact", "--text", text]) == 2
        assert "memsync's own hub key" in capsys.readouterr().err
    assert main(["add", str(me), "--kind", "fact", "--text", "a" * 64]) == 0
    assert [e.text for e in Memory(me).view().entries] == ["a" * 64]
