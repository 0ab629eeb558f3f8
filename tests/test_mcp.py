"""`memsync mcp` through the real protocol: the SDK's in-process client, the stdio wire
(server processes launched as a host launches them), and streamable HTTP on 127.0.0.1.
Nothing of memsync is mocked."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent, TextResourceContents

from memsync import Memory
from memsync.cli import main
from memsync.errors import MemsyncError
from memsync.local.statedir import StateDir
from memsync.mcp_server import DEFAULT_MAX_CHARS, build_server, check_host
from tests.helpers.paths import ROOT


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment a host gives the server: here, a private state directory."""
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": str(ROOT)}


def test_importing_the_cli_does_not_import_the_sdk() -> None:
    """The SDK is imported by `memsync mcp` only: other commands do not pay for it."""
    code = "import sys, memsync.cli; sys.exit(1 if 'mcp' in sys.modules else 0)"
    done = subprocess.run([sys.executable, "-c", code], timeout=60, check=False)
    assert done.returncode == 0


def test_a_non_loopback_host_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    check_host("127.0.0.1", False)
    check_host("::1", False)
    check_host("localhost", False)
    check_host("0.0.0.0", True)
    with pytest.raises(MemsyncError, match="refusing to listen"):
        check_host("0.0.0.0", False)
    assert main(["mcp", "--http", "--host", "192.0.2.1", "x.jsonl"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


# In-process: every tool, the resource and the prompt


def test_every_tool_the_resource_and_the_prompt(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    async def scenario() -> None:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"remember", "supersede", "forget", "recall"}
            kinds = tools["remember"].input_schema["properties"]["kind"]["enum"]
            assert sorted(kinds) == ["avoid", "fact", "lesson", "preference", "source"]
            assert tools["recall"].annotations
            assert tools["recall"].annotations.read_only_hint
            assert tools["forget"].annotations
            assert tools["forget"].annotations.destructive_hint
            assert tools["recall"].output_schema is not None

            r = await client.call_tool(
                "remember",
                {
                    "kind": "lesson",
                    "text": "When the mirror times out, retry with backoff.",
                    "scope": "project:memsync",
                    "tags": ["network"],
                    "confidence": 0.9,
                },
            )
            assert not r.is_error
            assert r.structured_content is not None
            lesson = r.structured_content["id"]
            r = await client.call_tool(
                "remember",
                {"kind": "preference", "text": "Prefers short answers.", "source": "user"},
            )
            pref = r.structured_content["id"] if r.structured_content else ""
            r = await client.call_tool(
                "remember", {"kind": "fact", "text": "CI runs on 2 cores.", "scope": "project:ci"}
            )
            fact = r.structured_content["id"] if r.structured_content else ""

            r = await client.call_tool("recall", {"query": "retries"})
            assert r.structured_content is not None
            assert [e["id"] for e in r.structured_content["entries"]] == [lesson]
            assert lesson in _text(r)

            r = await client.call_tool("supersede", {"id": fact, "text": "CI runs on 4 cores."})
            assert r.structured_content is not None
            new_fact = r.structured_content["id"]
            assert r.structured_content["supersedes"] == fact
            r = await client.call_tool("recall", {"query": "cores"})
            assert r.structured_content is not None
            assert [e["id"] for e in r.structured_content["entries"]] == [new_fact]
            assert r.structured_content["entries"][0]["kind"] == "fact"  # the old one's kind
            assert r.structured_content["entries"][0]["scope"] == "project:ci"  # and scope

            r = await client.call_tool("forget", {"id": lesson})
            assert not r.is_error
            r = await client.call_tool("recall", {"query": "retry backoff mirror"})
            assert r.structured_content == {"entries": [], "truncated": False}

            r = await client.call_tool("forget", {"id": "nosuchid"})
            assert r.is_error
            assert _text(r).startswith("memsync: ")

            res = await client.read_resource("memsync://me/prompt/project:ci")
            [content] = res.contents
            assert isinstance(content, TextResourceContents)
            assert "Prefers short answers." in content.text
            assert "4 cores" in content.text
            assert "2 cores" not in content.text
            listed = (await client.list_resources()).resources
            assert [str(x.uri) for x in listed] == ["memsync://me/prompt/global"]
            res = await client.read_resource("memsync://me/prompt/global")
            [content] = res.contents
            assert isinstance(content, TextResourceContents)
            assert "Prefers short answers." in content.text
            assert "cores" not in content.text
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["memsync://me/prompt/{scope}"]

            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["memory"]
            got = await client.get_prompt("memory", {"scope": "project:ci"})
            block = got.messages[0].content
            assert isinstance(block, TextContent)
            assert "Prefers short answers." in block.text
            assert pref in {e.id for e in Memory(path).view().entries}

    anyio.run(scenario)
    assert Memory(path).check().clean


def test_a_file_with_a_store_answers_as_a_fold(tmp_path: Path) -> None:
    """Over `ViewStore.min_bytes` (350 KB) the server answers from the file's quick part
    (written on the first call, `LiveQuick`): the prompt block is a fold's, before and
    after `supersede` and `forget`, and `supersede` carries the old entry's scope."""
    from memsync.local.located import located_view
    from memsync.local.reading import prompt_of
    from tests.helpers.records import deciding_file

    path = deciding_file(tmp_path / "me.jsonl", 1800)
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    def folded() -> str:
        with located_view([path]) as view:  # (every expiry in the file is long past)
            return prompt_of(view.records, None, DEFAULT_MAX_CHARS, view.lines(), markdown=True)

    async def scenario() -> None:
        async with Client(server) as client:
            [content] = (await client.read_resource("memsync://me/prompt/global")).contents
            assert isinstance(content, TextResourceContents)
            assert content.text == folded()
            args = {"id": "e00006", "text": "corrected"}
            r = await client.call_tool("supersede", args)
            assert r.structured_content is not None
            assert r.structured_content["supersedes"] == "e00006"
            new = r.structured_content["id"]
            r = await client.call_tool("forget", {"id": "e00004"})
            assert not r.is_error
            [content] = (await client.read_resource("memsync://me/prompt/global")).contents
            assert isinstance(content, TextResourceContents)
            assert content.text == folded()
            with located_view([path]) as view:
                pairs = zip(view.records, view.lines(), strict=True)
                live = {rec.id: json.loads(line) for rec, line in pairs}
            assert "e00006" not in live
            assert "e00004" not in live
            assert live[new]["scope"] == "github.com"  # e00006's

    anyio.run(scenario)
    assert StateDir(tmp_path / "state").view_ranks(path).exists()


def test_a_secret_is_refused_with_memsyncs_message(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    async def scenario() -> CallToolResult:
        async with Client(server) as client:
            return await client.call_tool(
                "remember", {"kind": "fact", "text": "deploy key AKIAIOSFODNN7EXAMPLE"}
            )

    r = anyio.run(scenario)
    assert r.is_error
    assert _text(r) == (
        "memsync: refusing to store what looks like a secret (AWS access key id); memory "
        "files are shared and never hold credentials"
    )
    assert b"AKIA" not in path.read_bytes()


def test_supersede_of_the_persons_entry_needs_their_word(tmp_path: Path) -> None:
    """Issue 24, item 9: an inferred `supersede` of an entry the person said succeeded and
    did nothing (rule 10 ignores it). It is refused with the reason unless the caller says
    source "user"; `source` and `confidence` are carried over like kind, scope and tags."""
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    async def scenario() -> None:
        async with Client(server) as client:
            r = await client.call_tool(
                "remember", {"kind": "preference", "text": "Prefers tabs.", "source": "user"}
            )
            said = r.structured_content["id"] if r.structured_content else ""
            size = path.stat().st_size
            r = await client.call_tool("supersede", {"id": said, "text": "Prefers spaces."})
            assert r.is_error
            assert "person said" in _text(r)
            assert 'source "user"' in _text(r)
            assert path.stat().st_size == size  # nothing written
            r = await client.call_tool(
                "supersede", {"id": said, "text": "Prefers spaces.", "source": "session:x"}
            )
            assert r.is_error
            r = await client.call_tool(
                "supersede", {"id": said, "text": "Prefers spaces.", "source": "user"}
            )
            assert not r.is_error
            r = await client.call_tool("recall", {"query": "prefers"})
            assert r.structured_content is not None
            [hit] = r.structured_content["entries"]
            assert (hit["text"], hit["source"], hit["kind"]) == (
                "Prefers spaces.",
                "user",
                "preference",
            )

            r = await client.call_tool(
                "remember",
                {
                    "kind": "fact",
                    "text": "CI has 2 cores.",
                    "source": "session:a",
                    "confidence": 0.7,
                },
            )
            fact = r.structured_content["id"] if r.structured_content else ""
            r = await client.call_tool("supersede", {"id": fact, "text": "CI has 4 cores."})
            assert not r.is_error
            r = await client.call_tool("recall", {"query": "cores"})
            assert r.structured_content is not None
            [hit] = r.structured_content["entries"]
            assert (hit["text"], hit["source"], hit["confidence"]) == (
                "CI has 4 cores.",
                "session:a",
                0.7,
            )

    anyio.run(scenario)


@pytest.mark.parametrize("name", ["a{b}", "my memory", "a#b?c", "50%"])
def test_a_memory_name_is_escaped_in_resource_uris(tmp_path: Path, name: str) -> None:
    """Issue 24, item 14: `memsync mcp 'a{b}.jsonl'` died at start (the brace read as a
    template parameter); `my memory.jsonl` and `a#b?c.jsonl` advertised invalid URIs."""
    path = tmp_path / f"{name}.jsonl"
    Memory.open(path).add("fact", "The name is escaped.")
    server = build_server(path, path.stem, StateDir(tmp_path / "state"))

    async def scenario() -> list[str]:
        async with Client(server) as client:
            [listed] = (await client.list_resources()).resources
            [template] = (await client.list_resource_templates()).resource_templates
            uris = [str(listed.uri), template.uri_template.replace("{scope}", "global")]
            for uri in uris:
                [content] = (await client.read_resource(uri)).contents
                assert isinstance(content, TextResourceContents)
                assert "The name is escaped." in content.text
            return uris

    for uri in anyio.run(scenario):
        # RFC 3986: only unreserved, reserved and percent-encoded characters; the name is
        # the whole authority, read back whole, with no query or fragment made of it.
        assert re.fullmatch(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-F]{2})+", uri), uri
        parts = urlsplit(uri)
        assert (parts.scheme, unquote(parts.netloc), parts.path) == (
            "memsync",
            name,
            "/prompt/global",
        )
        assert not parts.query
        assert not parts.fragment


def test_a_bad_kind_or_limit_is_rejected_by_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    server = build_server(path, "me", StateDir(tmp_path / "state"))

    async def scenario() -> list[CallToolResult]:
        async with Client(server) as client:
            return [
                await client.call_tool("remember", {"kind": "opinion", "text": "x"}),
                await client.call_tool("remember", {"kind": "fact", "text": "x", "confidence": 2}),
                await client.call_tool("recall", {"query": "x", "limit": 0}),
            ]

    results = anyio.run(scenario)
    for r in results:
        assert r.is_error
        # Issue 24, item 16: one readable sentence, not pydantic's dump with its URLs.
        assert "\n" not in _text(r)
        assert "pydantic" not in _text(r)
        assert "validation error" not in _text(r)
    schema = " (see the tool's input schema)"
    assert [_text(r) for r in results] == [
        "memsync: remember: kind should be 'preference', 'lesson', 'fact', 'source' or 'avoid'"
        + schema,
        "memsync: remember: confidence should be less than or equal to 1" + schema,
        "memsync: recall: limit should be greater than or equal to 1" + schema,
    ]
    assert len(Memory(path).view()) == 0


_VOCAB = [
    "retry",
    "backoff",
    "mirror",
    "deploy",
    "staging",
    "cluster",
    "cache",
    "bucket",
    "prefer",
    "short",
    "answers",
    "flaky",
    "network",
    "monday",
    "rate",
    "limit",
    "api",
    "user",
    "prose",
    "timeout",
    "runner",
    "build",
    "release",
    "schema",
]


@pytest.fixture(scope="module")
def big_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 100,000-entry memory (about 20 MB): genmem.py's mix of kinds, scopes, later
    versions and tombstones, written directly (a second, not genmem's several)."""
    rng = random.Random(7)
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    kinds = ["preference", "lesson", "fact", "source", "avoid"]
    scopes = ["global", "global", "github.com", "project:memsync", "project:web"]
    lines = [b'{"format": "agent-memory/0.1", "created_at": "2026-01-01T00:00:00Z"}']
    for i in range(100_000):
        obj: dict[str, object] = {
            "id": f"{i:012x}",
            "kind": kinds[i % 5],
            "text": " ".join(rng.choices(_VOCAB, k=12)).capitalize() + ".",
            "scope": scopes[i % 5],
            "confidence": round(rng.uniform(0.5, 1.0), 2),
            "created_at": f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:00:00.{i:06d}Z",
        }
        if i % 50 == 49:
            obj = {"id": f"{i - 1:012x}", "deleted": True, "created_at": "2026-02-01T00:00:00Z"}
        lines.append(json.dumps(obj).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.slow
def test_every_reply_is_bounded_on_a_100k_memory(big_memory: Path, tmp_path: Path) -> None:
    server = build_server(big_memory, "big", StateDir(tmp_path / "state"))

    async def scenario() -> None:
        async with Client(server) as client:
            r = await client.call_tool("recall", {"query": "retry prefer short", "limit": 200})
            assert r.structured_content is not None
            entries = r.structured_content["entries"]
            assert 0 < len(entries) <= 200
            assert len(json.dumps(r.structured_content)) <= DEFAULT_MAX_CHARS + 100
            assert len(_text(r)) <= DEFAULT_MAX_CHARS
            r = await client.call_tool("recall", {"query": "retry", "limit": 5})
            assert r.structured_content is not None
            assert len(r.structured_content["entries"]) == 5
            r = await client.call_tool("recall", {"query": "retry", "max_chars": 500})
            assert r.structured_content is not None
            assert len(json.dumps(r.structured_content["entries"])) <= 600
            assert r.structured_content["truncated"]
            res = await client.read_resource("memsync://big/prompt/global")
            [content] = res.contents
            assert isinstance(content, TextResourceContents)
            assert 1000 < len(content.text) <= DEFAULT_MAX_CHARS
            got = await client.get_prompt("memory", {})
            block = got.messages[0].content
            assert isinstance(block, TextContent)
            assert len(block.text) <= DEFAULT_MAX_CHARS + 100

    anyio.run(scenario)


# The stdio wire: server processes launched as a host launches them


def _stdio(path: Path, tmp_path: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memsync", "mcp", str(path)],
        env=_env(tmp_path),
        cwd=str(tmp_path),
    )
    return Client(params, read_timeout_seconds=60)


def _cli_adds(path: Path, count: int, ids: list[str]) -> None:
    for i in range(count):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memsync",
                "add",
                str(path),
                "--kind",
                "fact",
                "--text",
                f"added by the CLI, number {i}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, **_env(path.parent)},
        )
        ids.append(done.stdout.strip())


@pytest.mark.slow
def test_two_stdio_servers_and_the_cli_lose_nothing(tmp_path: Path) -> None:
    """200 concurrent `remember` calls split between two server processes, while the CLI
    appends to the same file: every acknowledged id is there exactly once, and the file
    is clean."""
    path = tmp_path / "shared.jsonl"
    Memory.open(path)
    acked: list[str] = []
    cli_ids: list[str] = []

    async def one_server(n: int) -> None:
        async with _stdio(path, tmp_path) as client:

            async def call(i: int) -> None:
                r = await client.call_tool(
                    "remember",
                    {"kind": "lesson", "text": f"server {n} lesson {i}", "scope": "project:t"},
                )
                assert not r.is_error, _text(r)
                assert r.structured_content is not None
                acked.append(r.structured_content["id"])

            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(call, i)
            r = await client.call_tool("recall", {"query": f"server {n} lesson", "limit": 200})
            assert r.structured_content is not None
            assert len(r.structured_content["entries"]) >= 100

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one_server, 0)
            tg.start_soon(one_server, 1)

    adder = threading.Thread(target=_cli_adds, args=(path, 8, cli_ids))
    adder.start()
    anyio.run(scenario)
    adder.join()
    assert len(acked) == 200
    assert len(cli_ids) == 8
    lines = [json.loads(x) for x in path.read_bytes().splitlines()[1:]]
    counts: dict[str, int] = {}
    for obj in lines:
        counts[obj["id"]] = counts.get(obj["id"], 0) + 1
    assert all(counts.get(i) == 1 for i in acked + cli_ids)
    assert len(lines) == 208
    done = subprocess.run(
        [sys.executable, "-m", "memsync", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.strip() == "clean"


# Streamable HTTP on 127.0.0.1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    path = tmp_path / "web.jsonl"
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsync", "mcp", "--http", "--port", str(port), str(path)],
        env={**os.environ, **_env(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"the HTTP server did not start: {err}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", path
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


@pytest.mark.slow
def test_streamable_http_on_loopback(http_server: tuple[str, Path]) -> None:
    url, path = http_server

    async def scenario() -> dict[str, Any]:
        async with Client(url, read_timeout_seconds=60) as client:
            r = await client.call_tool(
                "remember", {"kind": "avoid", "text": "Never force-push to main."}
            )
            assert not r.is_error
            r = await client.call_tool("recall", {"query": "pushing", "kinds": ["avoid"]})
            assert r.structured_content is not None
            content: dict[str, Any] = r.structured_content
            return content

    found = anyio.run(scenario)
    assert [e["text"] for e in found["entries"]] == ["Never force-push to main."]
    assert [e.text for e in Memory(path).view().entries] == ["Never force-push to main."]


@pytest.mark.slow
def test_mcp_memory_choice_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[memory]]\nname = "a"\npath = "{tmp_path / "a.jsonl"}"\n'
        f'[[memory]]\nname = "b"\npath = "{tmp_path / "b.jsonl"}"\n'
    )
    assert main(["mcp", "--config", str(config)]) == 2
    assert "choose one with --memory NAME" in capsys.readouterr().err
    assert main(["mcp", "--config", str(config), "--memory", "c"]) == 2
    assert capsys.readouterr().err == f"memsync: {config}: memory: no memory named 'c'\n"
    assert main(["mcp", "x.jsonl", "--memory", "a"]) == 2
    assert "not both" in capsys.readouterr().err
