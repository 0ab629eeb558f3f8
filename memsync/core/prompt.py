"""`to_prompt`: the short block an agent loads at the top of its context (the draft spec's
"grouped by kind and filtered by the scope of the current task"). Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PROMPT_KIND_ORDER", "PromptEntry", "render_prompt", "scope_matches"]

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


def _line(e: PromptEntry) -> str:
    where = "" if e.scope == "global" else f"[{e.scope}] "
    who = " (said by the person)" if e.user else ""
    return f"- {where}{e.text}{who}"


def _order(e: PromptEntry) -> tuple[int, bool, float, int, str]:
    return (PROMPT_KIND_ORDER.index(e.kind), not e.user, -e.confidence, e.ts, e.id)


def render_prompt(
    entries: Iterable[PromptEntry], scope: str | None = None, max_chars: int | None = None
) -> str:
    """Render the memory block for a task in `scope`.

    Entries are filtered by `scope_matches`, grouped by kind in `PROMPT_KIND_ORDER`, user
    entries first within a kind, then by confidence (highest first), age and id. With
    `max_chars`, the lowest-confidence entries are dropped first (inferred before user,
    older before newer on ties) until the block fits, and a last line says how many were
    left out. An empty memory renders as an empty string.
    """
    chosen = sorted((e for e in entries if scope_matches(e.scope, scope)), key=_order)
    text = _render(chosen, 0)
    if max_chars is None or len(text) <= max_chars:
        return text
    # Drop order: lowest confidence first; inferred before user; oldest first.
    drop_order = sorted(chosen, key=lambda e: (e.confidence, e.user, e.ts, e.id))

    def fitted(dropped: int) -> str:
        gone = set(map(id, drop_order[:dropped]))
        return _render([e for e in chosen if id(e) not in gone], dropped)

    # The text shrinks as more entries go: binary-search the fewest drops that fit.
    lo, hi = 1, len(chosen)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(fitted(mid)) <= max_chars:
            hi = mid
        else:
            lo = mid + 1
    return fitted(lo)[:max_chars]


def _render(entries: Sequence[PromptEntry], left_out: int) -> str:
    out: list[str] = []
    if entries or left_out:
        out.append("# Memory")
    kind = None
    for e in entries:
        if e.kind != kind:
            kind = e.kind
            out.append(f"## {_TITLES[kind]}")
        out.append(_line(e))
    if left_out:
        noun = "entry" if left_out == 1 else "entries"
        out.append(f"({left_out} lower-confidence {noun} left out to fit the budget)")
    return "\n".join(out) + "\n" if out else ""
