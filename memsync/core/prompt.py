"""`to_prompt`: the short block an agent loads at the top of its context (the draft spec's
"grouped by kind and filtered by the scope of the current task"). Pure and deterministic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PROMPT_KIND_ORDER", "PromptEntry", "fold", "render_prompt", "scope_matches"]

PROMPT_KIND_ORDER = ("preference", "avoid", "lesson", "fact", "source")
"""The fixed order of the groups: how the person wants things and what to skip come first."""

_TITLES = {
    "preference": "Preferences",
    "avoid": "Avoid",
    "lesson": "Lessons",
    "fact": "Facts",
    "source": "Sources",
}


@dataclass(frozen=True, slots=True)
class PromptEntry:
    """What the prompt needs of one live entry."""

    id: str
    kind: str
    text: str
    scope: str
    user: bool
    confidence: float
    ts: int


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


# Characters that would let one record's text break the block's structure: C0 and C1
# controls (newlines among them), DEL, and Unicode's line and paragraph separators. Each run
# folds to one space, so a record is always exactly one "- " line under its heading.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def fold(text: str) -> str:
    """`text` on one line: every run of control characters or line breaks becomes a space.

    A record's text or scope can then neither start a line of its own (a forged heading or
    entry) nor carry terminal escape sequences into the block.
    """
    return _BREAKS.sub(" ", text).strip() if _BREAKS.search(text) else text


def _line(e: PromptEntry) -> str:
    where = "" if e.scope == "global" else f"[{fold(e.scope)}] "
    return f"- {where}{fold(e.text)}"


def _heading(e: PromptEntry) -> str:
    """The group heading: the kind, and who said it. The person's word is marked by the
    heading, which no record's text can forge (texts are folded onto their "- " line)."""
    return f"## {_TITLES[e.kind]}{_BY_PERSON if e.user else ''}"


_BY_PERSON = " (said by the person)"


def _order(e: PromptEntry) -> tuple[int, bool, float, int, str]:
    return (PROMPT_KIND_ORDER.index(e.kind), not e.user, -e.confidence, e.ts, e.id)


def render_prompt(
    entries: Iterable[PromptEntry], scope: str | None = None, max_chars: int | None = None
) -> str:
    """Render the memory block for a task in `scope`.

    Entries are filtered by `scope_matches`, grouped by kind in `PROMPT_KIND_ORDER`, the
    person's entries (`source: "user"`) first within a kind under a heading that says so,
    then by confidence (highest first), age and id. Each entry is one line, its text folded
    (`fold`). With `max_chars`, the lowest-confidence entries are dropped first (inferred
    before user, older before newer on ties) until the block fits, and a last line says
    how many were left out. An empty memory renders as an empty string.

    Cost: one sort and one render; the number of entries to drop is found from the lines'
    lengths, without rendering the block again.
    """
    chosen = sorted((e for e in entries if scope_matches(e.scope, scope)), key=_order)
    lines = [_line(e) for e in chosen]
    size = _size(chosen, lines)
    if max_chars is None or size <= max_chars:
        return _render(chosen, lines, 0)
    # Drop order: lowest confidence first; inferred before user; oldest first. Walk it,
    # taking each dropped entry's line (and its heading, when its group empties) off the
    # size, until the block with its "left out" line fits.
    drop_order = sorted(range(len(chosen)), key=lambda i: _drop_key(chosen[i]))
    in_group = Counter(_heading(e) for e in chosen)
    body = size - len(_HEAD)
    dropped = 0
    for i in drop_order:
        body -= len(lines[i]) + 1
        heading = _heading(chosen[i])
        in_group[heading] -= 1
        if in_group[heading] == 0:
            body -= len(heading) + 1
        dropped += 1
        if len(_HEAD) + body + len(_left_out(dropped)) + 1 <= max_chars:
            break
    gone = set(drop_order[:dropped])
    kept = [i for i in range(len(chosen)) if i not in gone]
    return _render([chosen[i] for i in kept], [lines[i] for i in kept], dropped)[:max_chars]


def _drop_key(e: PromptEntry) -> tuple[float, bool, int, str]:
    return (e.confidence, e.user, e.ts, e.id)


_HEAD = "# Memory\n"


def _left_out(count: int) -> str:
    noun = "entry" if count == 1 else "entries"
    return f"({count} lower-confidence {noun} left out to fit the budget)"


def _size(entries: Sequence[PromptEntry], lines: Sequence[str]) -> int:
    """The length of `_render(entries, lines, 0)`, without building it."""
    if not entries:
        return 0
    headings = {_heading(e) for e in entries}
    return len(_HEAD) + sum(len(h) + 1 for h in headings) + sum(len(x) + 1 for x in lines)


def _render(entries: Sequence[PromptEntry], lines: Sequence[str], left_out: int) -> str:
    out: list[str] = []
    if entries or left_out:
        out.append(_HEAD[:-1])
    heading = None
    for e, text in zip(entries, lines, strict=True):
        if _heading(e) != heading:
            heading = _heading(e)
            out.append(heading)
        out.append(text)
    if left_out:
        out.append(_left_out(left_out))
    return "\n".join(out) + "\n" if out else ""
