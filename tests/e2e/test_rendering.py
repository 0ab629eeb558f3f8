"""SEMANTICS rule 17: every output keeps one record in one place (issue 24, items 2 and 3).

The same hostile records (`tests.helpers.hostile`) go through every output that shows
records: `memsync prompt`, `memsync recall` (the CLI, and the MCP tool's text through the
real SDK client), `memsync show`, `memsync export --markdown`, and the MCP prompt resource.
Plain outputs must hold one line per record, each record's needle on its own line, no
control character, and memsync's mark of the person's words only where memsync put it.
Markdown outputs are parsed as CommonMark (markdown-it-py): one list item per record, no
heading, link, image, raw HTML, code block, quote or nested list made by a record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mcp import Client
from mcp_types import CallToolResult, TextContent, TextResourceContents

from memsync.cli import main
from memsync.core.render import fold
from memsync.local.statedir import StateDir
from memsync.mcp_server import build_server
from tests.helpers.hostile import HEADER, HOSTILE, Hostile, write_hostile

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_TITLES = {"Preferences", "Avoid", "Lessons", "Facts", "Sources"}


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "me.jsonl"
    write_hostile(path)
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert not _CONTROL.search(out), f"a control character reached the output: {out!r}"
    return out


def _one_place(lines: list[str], expected: list[Hostile]) -> dict[str, str]:
    """Each expected record's needle on exactly one of `lines`, alone there, and no line
    without one: one record, one place. Return the line of each needle."""
    where: dict[str, str] = {}
    for line in lines:
        found = [h.needle for h in HOSTILE if h.needle in line]
        assert len(found) == 1, f"not one record on this line: {line!r}"
        assert found[0] not in where, f"{found[0]} on two lines"
        where[found[0]] = line
    assert set(where) == {h.needle for h in expected}
    return where


def _token(rest: str) -> tuple[str, str]:
    """The first field of a plain line (a JSON string when quoted) and what follows it."""
    if rest.startswith('"'):
        value, end = json.JSONDecoder().raw_decode(rest)
        return str(value), rest[end:]
    head, _, tail = rest.partition(" ")
    return head, " " + tail


# Plain outputs


@pytest.mark.parametrize("scope", [None, *sorted({h.scope for h in HOSTILE} - {"global"})])
def test_prompt(hostile: Path, capsys: pytest.CaptureFixture[str], scope: str | None) -> None:
    out = _cli(capsys, "prompt", str(hostile), *(["--scope", scope] if scope else []))
    lines = out.splitlines()
    headings = [x for x in lines if not x.startswith("- ")]
    allowed = {"# Memory"} | {f"## {t}" for t in _TITLES}
    allowed |= {f"## {t} (said by the person)" for t in _TITLES}
    assert set(headings) <= allowed, headings
    expected = [h for h in HOSTILE if h.scope in ("global", scope)]
    where = _one_place([x for x in lines if x.startswith("- ")], expected)
    for h in expected:  # the person's mark is the heading above, memsync's alone
        above = [x for x in lines[: lines.index(where[h.needle])] if x.startswith("#")][-1]
        assert above.endswith("(said by the person)") == h.user, (h.id, above)


def test_recall_cli(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(capsys, "recall", str(hostile), "zebra", "--limit", "100")
    where = _one_place(out.splitlines(), list(HOSTILE))
    for h in HOSTILE:
        rid, rest = _token(where[h.needle])
        assert rid == " ".join(h.id.split("\t"))
        kind, rest = rest.lstrip(" ").split(" ", 1)
        assert kind == h.kind
        _, rest = _token(rest.lstrip(" "))
        assert rest.startswith(" user  ") == h.user, (h.id, rest)


def test_recall_cli_json(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON outputs hold the same values with DEL, C1, U+2028 and bidi controls escaped
    (JSON leaves them raw with ensure_ascii=False): `_cli` checks none reached the output."""
    out = _cli(capsys, "recall", str(hostile), "zebra", "--limit", "100", "--json")
    hits = json.loads(out)
    assert {h["id"]: h["text"] for h in hits} == {h.id: h.text for h in HOSTILE}


def test_show(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(capsys, "show", str(hostile))
    where = _one_place(out.splitlines(), list(HOSTILE))
    for h in HOSTILE:
        rid, rest = _token(where[h.needle])
        assert rid == h.id  # quoted as JSON when it holds a space or a control
        _ts, kind, rest = rest.lstrip(" ").split(maxsplit=2)
        assert kind == h.kind
        scope, rest = _token(rest)
        assert scope == h.scope  # quoted as JSON, so read back whole
        assert rest.startswith(" user  ") == h.user, (h.id, rest)


# Markdown outputs


def _md(text: str) -> list[Token]:
    assert not _CONTROL.search(text), f"a control character reached the output: {text!r}"
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


_FORBIDDEN = {
    "link_open",
    "image",
    "html_inline",
    "html_block",
    "fence",
    "code_block",
    "blockquote_open",
    "hr",
    "table_open",
    "ordered_list_open",
    "em_open",
    "strong_open",
    "s_open",
    "softbreak",
    "hardbreak",
}


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for t in tokens:
        yield t
        yield from _walk(t.children or [])


def _items(tokens: list[Token]) -> list[tuple[str, Token]]:
    """(the heading above, the inline token) of every list item; checks that the
    document holds no markup a record could have made, and no list within a list."""
    bad = [t.type for t in _walk(tokens) if t.type in _FORBIDDEN]
    assert not bad, bad
    items: list[tuple[str, Token]] = []
    heading, depth = "", 0
    for i, t in enumerate(tokens):
        if t.type == "bullet_list_open":
            depth += 1
            assert depth == 1, "a list inside a list item"
        elif t.type == "bullet_list_close":
            depth -= 1
        elif t.type == "heading_open":
            heading = _plain(tokens[i + 1])
        elif t.type == "inline" and depth:
            kinds = {c.type for c in t.children or []}
            assert kinds <= {"text", "code_inline"}, kinds
            items.append((heading, t))
    return items


def _plain(inline: Token) -> str:
    return "".join(c.content for c in inline.children or [])


def test_export_markdown(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokens = _md(_cli(capsys, "export", "--markdown", str(hostile)))
    # Headings: the title, memsync's kinds, and each scope as its own text, nothing else.
    headings = {_plain(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"}
    scopes = {" ".join(h.scope.split()) for h in HOSTILE}
    titles = _TITLES | {f"{t} (said by the person)" for t in _TITLES}
    assert headings - titles - scopes == {"Memory: me"}, headings
    items = _items(tokens)
    where = _one_place([_plain(t) for _, t in items], list(HOSTILE))
    assert len(items) == len(HOSTILE)
    for h in HOSTILE:
        [(heading, inline)] = [(x, t) for x, t in items if _plain(t) == where[h.needle]]
        # The heading above is the scope's; the kind's (which says who) is the h2 above it.
        section = next(
            _plain(tokens[i + 1])
            for i in range(tokens.index(inline), -1, -1)
            if tokens[i].type == "heading_open" and tokens[i].tag == "h2"
        )
        assert section.endswith("(said by the person)") == h.user, (h.id, section)
        assert heading == " ".join(h.scope.split())
        *_, code = inline.children or []
        assert code.type == "code_inline"
        assert code.content == h.id.replace("\t", " ")  # the id's code span, unbroken


def _call(path: Path, state: Path, name: str, args: dict[str, Any]) -> CallToolResult:
    server = build_server(path, "me", StateDir(state))

    async def scenario() -> CallToolResult:
        async with Client(server) as client:
            return await client.call_tool(name, args)

    return anyio.run(scenario)


def test_recall_mcp(hostile: Path, tmp_path: Path) -> None:
    r = _call(hostile, tmp_path / "mcp-state", "recall", {"query": "zebra", "limit": 100})
    assert not r.is_error
    assert r.structured_content is not None
    assert {e["id"] for e in r.structured_content["entries"]} == {h.id for h in HOSTILE}
    [block] = r.content
    assert isinstance(block, TextContent)
    items = _items(_md(block.text))
    where = _one_place([_plain(t) for _, t in items], list(HOSTILE))
    assert len(items) == len(HOSTILE)
    for h in HOSTILE:
        [inline] = [t for _, t in items if _plain(t) == where[h.needle]]
        code, after, *_ = inline.children or []
        assert code.type == "code_inline"
        assert code.content == h.id.replace("\t", " ")
        assert after.content.startswith(f" {h.kind}, said by the person (") == h.user


def test_prompt_resource_mcp(hostile: Path, tmp_path: Path) -> None:
    server = build_server(hostile, "me", StateDir(tmp_path / "mcp-state"))

    async def scenario() -> str:
        async with Client(server) as client:
            res = await client.read_resource("memsync://me/prompt/global")
            [content] = res.contents
            assert isinstance(content, TextResourceContents)
            return content.text

    tokens = _md(anyio.run(scenario))
    items = _items(tokens)
    expected = [h for h in HOSTILE if h.scope == "global"]
    _one_place([_plain(t) for _, t in items], expected)
    for heading, inline in items:
        h = next(h for h in expected if h.needle in _plain(inline))
        assert heading.endswith("(said by the person)") == h.user, (h.id, heading)


# Reports that name a record: check's twins, a handoff's dry run


def test_check_and_handoff_name_records_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id may hold U+2028 or a bidi override (rule 4 forbids only C0 and C1 controls):
    `check` names it as a token, and a handoff's dry run shows the line with them written
    out, so no report line breaks in two or reverses on screen."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    rid = "tw\u2028in \u202eid"
    twins = [
        Hostile(id=rid, text=f"needle{n} text {n}\u2028forged", needle=f"needle{n}") for n in (1, 2)
    ]
    src = tmp_path / "src.jsonl"
    src.write_bytes(b"".join([HEADER, *(h.line(0) for h in twins)]))
    assert main(["check", str(src)]) == 1
    out, _ = capsys.readouterr()
    assert not _CONTROL.search(out), out
    [line] = [x for x in out.splitlines() if x.startswith("twins: id ")]
    rid_shown, _ = _token(line.removeprefix("twins: id "))
    assert rid_shown == fold(rid)
    _cli(capsys, "handoff", str(src), str(tmp_path / "dest.jsonl"), "--dry-run")
