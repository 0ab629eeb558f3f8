"""`memsync.core.render`: record strings for plain and Markdown outputs (SEMANTICS rule 17)."""

from __future__ import annotations

import json

import pytest
from markdown_it import MarkdownIt

from memsync.core.render import CONTROLS, fold, json_text, md_code, md_text, token, visible

HOSTILE_CONTROLS = [
    "a\nb",
    "a\r\nb",
    "\x1b]0;title\x07x",
    "\x1b[2Jx",
    "c1 \x9b31m",
    "nel\x85x",
    "del\x7fx",
    "ls\u2028ps\u2029x",
    "bidi \u202eevil\u202c \u2066iso\u2069 \u200fmark",
    "tab\tx",
    "\x00nul",
]


@pytest.mark.parametrize("text", HOSTILE_CONTROLS)
def test_fold_leaves_no_control_character_and_one_line(text: str) -> None:
    out = fold(text)
    assert CONTROLS.search(out) is None
    assert len(out.splitlines()) == 1


def test_fold_leaves_ordinary_text_alone() -> None:
    assert fold("  Prefers short answers. ") == "  Prefers short answers. "
    assert fold("a\n\n\nb") == "a b"


@pytest.mark.parametrize("text", HOSTILE_CONTROLS)
def test_visible_writes_controls_out(text: str) -> None:
    out = visible(text)
    assert CONTROLS.search(out) is None
    assert "\\" in out


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("project:x", "project:x"),
        ("api.github.com", "api.github.com"),
        ("x user", '"x user"'),
        ("", '""'),
        ("a]b", '"a]b"'),
        ("a\nb", '"a b"'),
        ('say "hi"', '"say \\"hi\\""'),
    ],
)
def test_token_quotes_what_would_blur_where_a_field_ends(text: str, shown: str) -> None:
    assert token(text) == shown


def test_token_escaped_decodes_back_to_the_string() -> None:
    for text in ["x\x1b[2J", "a b\tc", "id\nuser"]:
        out = token(text, escaped=True)
        assert CONTROLS.search(out) is None
        assert json.loads(out) == text


def _inline(markdown: str) -> list[str]:
    """The token types markdown-it makes of `markdown` (one paragraph or item)."""
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)
    types = [t.type for t in tokens]
    for t in tokens:
        types += [c.type for c in t.children or []]
    return types


@pytest.mark.parametrize(
    "text",
    [
        "# heading",
        "## Preferences",
        "- item",
        "+ item",
        "* item",
        "1. ordered",
        "1) ordered",
        "> quote",
        "```fence",
        "~~~fence",
        "    indented code",
        "---",
        "===",
        "![](https://x.example/t.png)",
        "[a](https://b.example)",
        "<https://auto.example>",
        "<img src=x>",
        "&#27; &amp;",
        "*em* **strong** _em_ ~~del~~",
        "| a | b |",
        "a\n\n## Preferences\n\n- forged",
        "[x]: https://ref.example",
        "\\",
        "`code` ``two``",
    ],
)
def test_md_text_renders_as_the_same_characters_only(text: str) -> None:
    """As a list item's content, a paragraph or a heading's: text, nothing else."""
    out = md_text(text)
    for doc in (f"- {out}", out, f"### {out}"):
        types = set(_inline(doc))
        assert types <= {
            "bullet_list_open",
            "bullet_list_close",
            "list_item_open",
            "list_item_close",
            "paragraph_open",
            "paragraph_close",
            "heading_open",
            "heading_close",
            "inline",
            "text",
        }, (text, doc, types)
        if not doc.startswith("### "):
            assert "heading_open" not in types
    tokens = MarkdownIt("commonmark").parse(out)
    rendered = "".join(c.content for t in tokens for c in t.children or [])
    assert rendered == " ".join(fold(text).split())


@pytest.mark.parametrize(
    "rid", ["abc", "a`b", "`lead", "trail`", "a``b`c", " spaced ", "x`](https://evil)`", ""]
)
def test_md_code_is_one_code_span_holding_the_string(rid: str) -> None:
    tokens = MarkdownIt("commonmark").parse(f"- text {md_code(rid)} after")
    [inline] = [t for t in tokens if t.type == "inline"]
    children = inline.children or []
    assert [c.type for c in children] == ["text", "code_inline", "text"]
    assert children[1].content.strip() == rid.strip()
    assert children[2].content == " after"


@pytest.mark.parametrize("text", HOSTILE_CONTROLS)
def test_json_text_escapes_what_json_leaves_raw_and_keeps_the_values(text: str) -> None:
    document = json.dumps({"text": text, "tags": [text]}, ensure_ascii=False)
    out = json_text(document)
    assert CONTROLS.search(out) is None
    assert json.loads(out) == json.loads(document)


def test_every_control_character_is_outside_what_isprintable_accepts() -> None:
    """`fold` and `visible` return a printable string unchanged without searching it
    (issue 20): sound only if no character `CONTROLS` matches is printable. Checked over
    every code point (surrogates aside), and against the pattern itself."""
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    found = CONTROLS.compiled().findall(everything)
    assert len(found) == 0x20 + 0x21 + 2 + 1 + 2 + 5 + 4  # C0, DEL and C1, the rest
    assert [ch for ch in found if ch.isprintable()] == []
    printable = "Deploy via `make ship` \u00e9\u4e2d (scope: a/b) \U0001f600"
    assert printable.isprintable()
    assert fold(printable) is printable
    assert visible(printable) is printable
    assert fold("a\u202eb\nc") == "a b c"
