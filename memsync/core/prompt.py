"""`to_prompt`: the short block an agent loads at the top of its context (the draft spec's
"grouped by kind and filtered by the scope of the current task"). Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial

import msgspec

from memsync.core import render
from memsync.core.records import Record

__all__ = [
    "HEAD_CHARS",
    "PROMPT_KIND_ORDER",
    "PromptEntry",
    "drop_rank",
    "entry_of",
    "fold",
    "kept_at_most",
    "line_chars",
    "overflows",
    "render_prompt",
    "scope_matches",
    "too_long_for",
]

PROMPT_KIND_ORDER = ("preference", "avoid", "lesson", "fact", "source")
"""The fixed order of the groups: how the person wants things and what to skip come first."""

_TITLES = {
    "preference": "Preferences",
    "avoid": "Avoid",
    "lesson": "Lessons",
    "fact": "Facts",
    "source": "Sources",
}


class PromptEntry(msgspec.Struct, frozen=True):
    """What the prompt needs of one live entry."""

    id: str
    kind: str
    text: str
    scope: str
    user: bool
    confidence: float
    ts: int


def entry_of(rec: Record) -> PromptEntry:
    """The prompt entry of a live record (an entry, not a tombstone: rule 3); `scope`
    defaults to `global`, `confidence` to 1.0."""
    f = rec.fields()
    return PromptEntry(
        rec.id,
        f["kind"],
        f["text"],
        f.get("scope", "global"),
        rec.user,
        float(f.get("confidence", 1.0)),
        rec.ts,
    )


def scope_matches(entry_scope: str, task_scope: str | None) -> bool:
    """Whether an entry belongs in the prompt of a task with scope `task_scope`.

    Global entries always do. With no task scope only global entries do. A domain matches
    itself and its subdomains (`github.com` serves a task on `api.github.com`);
    `project:x` and any other scope match exactly.
    """
    if entry_scope == "global":
        return True
    if task_scope is None:
        return False
    if entry_scope == task_scope:
        return True
    is_domain = ":" not in entry_scope and "." in entry_scope
    return is_domain and task_scope.endswith("." + entry_scope)


def fold(text: str) -> str:
    """`text` on one line (`memsync.core.render.fold`, SEMANTICS rule 17)."""
    return render.fold(text)


def _line(e: PromptEntry, markdown: bool = False) -> str:
    """The entry's one "- " line: its scope (when not global) in brackets, then its text.
    Every string is rendered by `memsync.core.render` (rule 17): plain, or with
    `markdown` (the MCP resource, read as text/markdown) escaped as Markdown, the scope's
    brackets too (GFM reads "- [x] " as a ticked task)."""
    if markdown:
        where = "" if e.scope == "global" else f"\\[{render.md_text(e.scope)}\\] "
        return f"- {where}{render.md_text(e.text)}"
    where = "" if e.scope == "global" else f"[{render.token(e.scope)}] "
    return f"- {where}{render.fold(e.text)}"


def _heading(e: PromptEntry) -> str:
    """The group heading: the kind, and who said it. The person's word is marked by the
    heading, which no record's text can forge (texts are folded onto their "- " line)."""
    return f"## {_TITLES[e.kind]}{_BY_PERSON if e.user else ''}"


_BY_PERSON = " (said by the person)"
_LONGEST_HEADING = len("## ") + max(map(len, _TITLES.values())) + len(_BY_PERSON) + 1


def _order(e: PromptEntry) -> tuple[int, bool, float, int, str]:
    return (PROMPT_KIND_ORDER.index(e.kind), not e.user, -e.confidence, e.ts, e.id)


def render_prompt(
    entries: Iterable[PromptEntry],
    scope: str | None = None,
    max_chars: int | None = None,
    *,
    more: int = 0,
    markdown: bool = False,
) -> str:
    """Render the memory block for a task in `scope`.

    Entries are filtered by `scope_matches`, grouped by kind in `PROMPT_KIND_ORDER`, the
    person's entries (`source: "user"`) first within a kind under a heading that says so,
    then by confidence (highest first), age and id. Each entry is one line, its scope and
    text rendered by `memsync.core.render` (SEMANTICS rule 17): plain, or escaped as
    Markdown with `markdown`. Only the headings say that the person said an entry.

    With `max_chars`: an entry too long for any block of that size (`too_long_for`) is
    passed over, and the lowest-confidence entries are dropped first (inferred before
    user, older before newer on ties) until the block fits; a last line says how many were
    left out and why. An empty memory renders as an empty string.

    Cost with `max_chars`: one sort of the matching entries by drop order, then lines
    rendered only for the entries kept (and the few needed to see where the budget ends):
    a 2,000-character block of a 100k-entry memory renders a few dozen lines.

    `more` (with `max_chars`): how many further entries match `scope` and come before all
    of `entries` in drop order (`drop_rank`). No block holds more than
    `kept_at_most(max_chars)` entries, nor more than the last to drop whose lines alone
    overflow it (`overflows`), so a caller may pass only those of the last to drop, and
    count the others here, as left out: the block is the same (the memory of a million
    entries need not be held to render a few dozen). Entries `too_long_for` the budget
    are counted apart in the block's last line, so the caller passes every one of them,
    and counts none in `more`.

    Raises:
        ValueError: `more` with fewer matching entries than `kept_at_most(max_chars)`
        whose lines do not overflow `max_chars`.
    """
    line_of = partial(_line, markdown=markdown)
    matching = [e for e in entries if scope_matches(e.scope, scope)]
    if more and (
        max_chars is None
        or (
            len(matching) < kept_at_most(max_chars)
            and not overflows(matching, max_chars, markdown=markdown)
        )
    ):
        raise ValueError(
            "`more` needs max_chars, and kept_at_most(max_chars) entries or entries that overflow it"
        )
    if max_chars is None:
        chosen = sorted(matching, key=_order)
        return _render(chosen, [line_of(e) for e in chosen], 0)
    # Drop order: lowest confidence first; inferred before user; oldest first. So the
    # entries kept are a prefix of the reverse order: walk it, adding each entry's line
    # (and its heading, the first time), while the block with its "left out" line fits.
    # Dropping one more entry always shrinks the block (a line of 3 characters or more
    # goes, the count's line grows by 1 at most), so the first entry that does not fit
    # ends the walk; only keeping all of them (no "left out" line) can fit again.
    # An entry too long for any block (issue 24, item 12: one 30,000-character fact emptied
    # a 20,000-character block) is set aside first, and named in the last line.
    keep_order = sorted(matching, key=_drop_key, reverse=True)
    fitting = [e for e in keep_order if not too_long_for(e, max_chars, markdown=markdown)]
    too_long = len(keep_order) - len(fitting)
    n = len(keep_order) + more
    kept: list[PromptEntry] = []
    lines: dict[int, str] = {}
    headings: set[str] = set()
    body = 0
    for k, e in enumerate(fitting, 1):
        line = line_of(e)
        heading = _heading(e)
        grown = body + len(line) + 1 + (0 if heading in headings else len(heading) + 1)
        left = n - k
        tail = len(_left_out(left - too_long, too_long)) + 1 if left else 0
        if len(_HEAD) + grown + tail > max_chars:
            if (
                left == 0
                or more
                or too_long
                or not _rest_fits(fitting[k - 1 :], headings, body, max_chars, markdown)
            ):
                break  # with `more`, everything is more than `kept_at_most`: it cannot fit
            kept = fitting  # everything fits, with no "left out" line
            lines = {id(x): line_of(x) for x in kept}
            break
        kept.append(e)
        lines[id(e)] = line
        headings.add(heading)
        body = grown
    chosen = sorted(kept, key=_order)
    block = _render(chosen, [lines[id(e)] for e in chosen], n - len(chosen) - too_long, too_long)
    return block[:max_chars]


def line_chars(entry: PromptEntry, *, markdown: bool = False) -> int:
    """The characters `entry`'s line takes in a block, its newline included (its heading
    aside): the least it adds to a block that holds it."""
    return len(_line(entry, markdown)) + 1


def overflows(entries: Iterable[PromptEntry], max_chars: int, *, markdown: bool = False) -> bool:
    """Whether the lines of `entries` (those not `too_long_for` the block) alone make a
    block longer than `max_chars`: a walk down the drop order that holds them all then
    stops at one of them, and never needs an entry after them (`render_prompt`)."""
    total = len(_HEAD)
    for e in entries:
        if not too_long_for(e, max_chars, markdown=markdown):
            total += line_chars(e, markdown=markdown)
            if total > max_chars:
                return True
    return False


def too_long_for(entry: PromptEntry, max_chars: int, *, markdown: bool = False) -> bool:
    """Whether `entry` does not fit in a block of `max_chars` even on its own (the head,
    its heading and its line): such an entry is set aside, and the block says so, rather
    than end the packing at it (issue 24, item 12)."""
    # A line is at most twice its strings (Markdown escapes, JSON quotes) plus its marks.
    if 2 * (len(entry.text) + len(entry.scope)) + 16 + len(_HEAD) + _LONGEST_HEADING < max_chars:
        return False
    return len(_HEAD) + len(_heading(entry)) + 1 + len(_line(entry, markdown)) + 1 > max_chars


def _rest_fits(
    rest: Sequence[PromptEntry], headings: set[str], body: int, limit: int, markdown: bool
) -> bool:
    """Whether the block holding every entry (the kept ones make `body` with `headings`,
    `rest` are the others) fits in `limit`: summed until it does not."""
    seen = set(headings)
    for e in rest:
        heading = _heading(e)
        body += len(_line(e, markdown)) + 1 + (0 if heading in seen else len(heading) + 1)
        seen.add(heading)
        if len(_HEAD) + body > limit:
            return False
    return True


def _drop_key(e: PromptEntry) -> tuple[float, bool, int, str]:
    return drop_rank(e.confidence, e.user, e.ts, e.id)


def drop_rank(confidence: float, user: bool, ts: int, rid: str) -> tuple[float, bool, int, str]:
    """Where an entry comes in the order the budget drops entries (lowest first): lower
    confidence, then inferred before the person's, then older, then by id."""
    return (confidence, user, ts, rid)


def kept_at_most(max_chars: int) -> int:
    """More entries than a block of `max_chars` characters can hold: each takes at least
    3 ("- " and its newline, the text may be empty)."""
    return max(0, max_chars) // 3 + 1


_HEAD = "# Memory\n"
HEAD_CHARS = len(_HEAD)
"""The characters of a block's first line (its newline included)."""


def _left_out(lower: int, too_long: int = 0) -> str:
    """The block's last line: how many entries were left out, and why."""
    lower_ones = f"{lower} lower-confidence {_noun(lower)}"
    if not too_long:
        return f"({lower_ones} left out to fit the budget)"
    why = f"{too_long} {_noun(too_long)} too long for the budget"
    return f"({why} and {lower_ones} left out)" if lower else f"({why} left out)"


def _noun(count: int) -> str:
    return "entry" if count == 1 else "entries"


def _size(entries: Sequence[PromptEntry], lines: Sequence[str]) -> int:
    """The length of `_render(entries, lines, 0)`, without building it."""
    if not entries:
        return 0
    headings = {_heading(e) for e in entries}
    return len(_HEAD) + sum(len(h) + 1 for h in headings) + sum(len(x) + 1 for x in lines)


def _render(
    entries: Sequence[PromptEntry], lines: Sequence[str], left_out: int, too_long: int = 0
) -> str:
    out: list[str] = []
    if entries or left_out or too_long:
        out.append(_HEAD[:-1])
    heading = None
    for e, text in zip(entries, lines, strict=True):
        if _heading(e) != heading:
            heading = _heading(e)
            out.append(heading)
        out.append(text)
    if left_out or too_long:
        out.append(_left_out(left_out, too_long))
    return "\n".join(out) + "\n" if out else ""
