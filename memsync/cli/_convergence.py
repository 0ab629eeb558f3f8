"""Convergence in `memsync status` (issue 21): which machines hold the same memory, and how
the others differ; and `memsync diff`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memsync.core.convergence import DIVERGED, Standing
from memsync.core.render import token
from memsync.core.timestamps import format_ts

if TYPE_CHECKING:
    from memsync.config import Config
    from memsync.config.wiring import ConvergenceRow

__all__ = ["convergence_json", "convergence_lines", "convergence_problems", "convergence_rows"]


def convergence_rows(config: Config, now: int, *, live: bool) -> list[ConvergenceRow]:
    from memsync.config.wiring import convergence_of

    return convergence_of(config, now, live=live)


def _line(s: Standing) -> str:
    state = s.state if not s.detail else f"{s.state}: {s.detail}"
    if s.state == "this machine" and not s.detail:
        state = "this machine"
    seen = "no receipt" if s.receipt_time is None else f"receipt {format_ts(s.receipt_time)}"
    view = "" if s.digest is None else f"  view {s.digest} {s.entries} entries"
    return f"  {token(s.replica):<20} {state}{view}  ({seen})"


def convergence_lines(rows: list[ConvergenceRow]) -> list[str]:
    """What `memsync status` prints of convergence: a head line per memory and remote, and
    a line per replica."""
    out = []
    for row in rows:
        head = f"convergence of {row.memory} through {row.remote}: {row.convergence.summary()}"
        if row.error is not None:
            when = "never" if row.listed_at is None else format_ts(row.listed_at)
            head += f" (hub not read now: {row.error}; as last seen at {when})"
        out.append(head)
        out += [_line(s) for s in row.convergence.replicas]
    return out


def convergence_problems(rows: list[ConvergenceRow]) -> list[str]:
    """Diverged replicas: the same records read, another view. A bug or a version
    difference, never a matter of waiting: a problem at once."""
    return [
        f"{row.memory} <-> {row.remote}: replica {s.replica!r} DIVERGED: {s.detail}"
        for row in rows
        for s in row.convergence.replicas
        if s.state == DIVERGED
    ]


def convergence_json(rows: list[ConvergenceRow]) -> list[dict[str, Any]]:
    return [
        {
            "memory": row.memory,
            "remote": row.remote,
            "listed_at": None if row.listed_at is None else format_ts(row.listed_at),
            "error": row.error,
            **row.convergence.to_json(),
        }
        for row in rows
    ]
