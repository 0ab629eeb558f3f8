"""Rendering record strings for people and agents (SEMANTICS rule 17). Pure: strings in,
strings out.

Every output that shows a record (`prompt`, `recall`, `show`, `export --markdown`, the MCP
replies) builds its lines with these functions and nothing else, so that one record stays
in one place: no text, scope, tag, id or field name can start a new line, a heading, a list
item, a link, an image or a terminal escape, or pass itself off as the person's words.

- `fold` (plain text for agents: the prompt, recall) and `visible` (plain text for a person
  inspecting a file: `show`) take every control character out: C0 and C1 controls (newline,
  carriage return, ESC, BEL among them), DEL, Unicode's line and paragraph separators, and
  the bidirectional overrides and isolates that reorder what a terminal shows.
- `token` writes a record string that is not the last field of its line so that where it
  ends is clear: as is when it holds only ordinary characters, else quoted as a JSON string.
  A scope of `"x user"` can then not pass for the scope `x` of an entry of the person's.
- `md_text` and `md_code` write a record string into Markdown: the characters that make
  markup are escaped (headings, list and quote markers, emphasis, links, images, raw HTML,
  entities, tables), and a code span's fence is longer than any run of backticks inside.
- What the person said (`source: "user"`) is marked by the caller with memsync's own words
  in a place no record string reaches (a heading, or a column before the record's
  strings), never by anything a record holds.
"""

from __future__ import annotations

import re

from memsync.core.lazyre import LazyPattern

__all__ = ["CONTROLS", "fold", "json_text", "md_code", "md_text", "token", "visible"]

# Compiled at first use (`LazyPattern`, issue 20): a command that renders no record
# string, or none with these characters, compiles none of them (about 0.6 ms).
CONTROLS = LazyPattern(
    "[\x00-\x1f\x7f-\x9f"  # C0 (newline, ESC, BEL...), DEL, C1 (NEL, CSI, OSC...)
    "\u2028\u2029"  # line and paragraph separators: a new line to many readers
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidi marks, overrides and isolates
)
"""One character no rendered record string may carry. Each is outside what
`str.isprintable` accepts (categories Cc, Zl, Zp and Cf), so a printable string holds none:
the functions below answer those, most record strings, without compiling the pattern
(issue 20: about 0.5 ms of a `prompt`)."""

_RUNS = LazyPattern(CONTROLS.pattern + "+")


def fold(text: str) -> str:
    """`text` on one line: each run of control characters (`CONTROLS`) becomes one space
    (and then the ends are trimmed), so the string can neither start a line of its own nor
    carry a terminal escape. Text without them is returned unchanged."""
    if text.isprintable() or CONTROLS.search(text) is None:
        return text
    return _RUNS.sub(" ", text).strip()


def visible(text: str) -> str:
    """`text` with each control character written as its Python escape (`\\n`, `\\x1b`,
    `\\u202e`): for `show`, where a person inspecting a file should see what is there."""
    if text.isprintable() or CONTROLS.search(text) is None:
        return text
    return CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


def json_text(document: str) -> str:
    """A JSON document (as `json.dumps(..., ensure_ascii=False)` writes it) with every
    control character JSON leaves raw (DEL, C1, U+2028 and U+2029, bidi controls)
    written as a `\\uXXXX` escape: the same JSON values, safe on a terminal. Those
    characters can only be inside strings, where the escape means the same."""
    if document.isascii() and "\x7f" not in document:  # DEL is the one ASCII among them
        return document
    if _JSON_RAW.search(document) is None:
        return document
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


# What JSON writes raw inside strings: C0 is always escaped there, and outside strings it
# is only the layout's newlines and spaces.
_JSON_RAW = LazyPattern("[\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# A record string in the middle of a plain line: whitespace would make it two fields, and
# these delimiters are the ones the outputs put around fields ("[id]", "(scope):", ", ").
_UNQUOTED_END = LazyPattern(r'[\s"\\\[\](){},;`]')


def token(text: str, *, escaped: bool = False) -> str:
    """A record string (an id, a scope, a tag) for a field of a plain line that others
    follow: as is when it holds no control character, whitespace, quote, bracket,
    parenthesis, comma, semicolon or backtick, else quoted as a JSON string (`"x user"`),
    so that where it ends is never in doubt. Control characters are folded (`fold`), or
    with `escaped` written out (JSON's `\\u001b`, then `visible` for the rest). The empty
    string is `""`."""
    if escaped:
        if text and CONTROLS.search(text) is None and _UNQUOTED_END.search(text) is None:
            return text
        return visible(_quoted(text))
    text = fold(text)
    if text and _UNQUOTED_END.search(text) is None:
        return text
    return _quoted(text)


def _quoted(text: str) -> str:
    import json  # a string that needs quoting is rare: `prompt` starts without json (issue 20)

    return json.dumps(text, ensure_ascii=False)


# CommonMark's inline markup: escapes (\), code spans (`), emphasis (* _), strikethrough
# (~, GFM), links and images ([ ] !), autolinks and raw HTML (< >), entities (&), tables
# (|, GFM), and headings and block quotes (# >) where a string starts a line or an item.
_MD_INLINE = re.compile(r"([\\`*_~\[\]!<>&|#])")
# Markers that only count at the start of a line or of a list item's content: a bullet
# (- +), an ordered item ("1." "1)"), a setext underline or thematic break (= -).
_MD_LEADING = re.compile(r"^([-+=])|^(\d{1,9})([.)])")


def md_text(text: str) -> str:
    """A record string as Markdown inline text that renders as exactly those characters:
    control characters folded, runs of whitespace made one space (indentation would make
    a code block), markup characters backslash-escaped, and a leading list or heading
    marker escaped too (the string may begin a list item or a heading)."""
    text = " ".join(fold(text).split())
    text = _MD_INLINE.sub(r"\\\1", text)
    return _MD_LEADING.sub(_escape_leading, text)


def _escape_leading(m: re.Match[str]) -> str:
    if m.group(1):
        return "\\" + m.group(1)
    return m.group(2) + "\\" + m.group(3)


def md_code(text: str) -> str:
    """A record string as a Markdown code span (for ids and tags): folded, fenced by one
    backtick more than its longest run of backticks, and padded with a space where it
    starts or ends with a backtick or a space (CommonMark strips one space each side), so
    nothing inside can close the span or become markup."""
    text = fold(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    if not text or text[0] in "` " or text[-1] in "` ":
        text = f" {text} "
    return f"{fence}{text}{fence}"
