"""Which machines hold the same memory, and how the others differ (issue 21), pure: judged
from the receipts in a hub (`memsync.core.receipts`) and the sizes of its replica files.

Each replica is compared with this machine's own receipt:

- **agrees**: the same view digest;
- **behind**: it has not read records that exist in the hub (a file it read less of than
  the hub holds, or of another generation: rewritten by its owner's compaction since);
- **ahead**: it holds live entries the hub does not (`unpushed` in its receipt; for this
  machine also local lines written since its last push);
- **diverged**: it has read what this machine read, neither holds anything unpushed, and
  the views differ: a bug or a difference of versions, reported loudly (rules 8 to 12
  make the view a function of the records and the time);
- **expired between**: as diverged, but an `expires_at` of the older receipt's view falls
  between the two receipts' times (rule 11): the views were taken at different instants,
  not comparable until both publish again;
- **silent**: no receipt for longer than `silent_after`: asleep, offline, or retired
  (`memsync forget-replica` says so); **no receipt**: a hub file but no receipt (an older
  memsync, or not synced since the upgrade); **retired**: this machine was told to forget it.

When this machine is itself behind or ahead, a peer with another digest "differs" for that
reason, not for its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from memsync.core.receipts import Receipt
from memsync.core.timestamps import SECOND, format_ts

__all__ = [
    "AGREES",
    "AHEAD",
    "BEHIND",
    "DIFFERS",
    "DIVERGED",
    "EXPIRED_BETWEEN",
    "NO_RECEIPT",
    "RETIRED",
    "SILENT",
    "SILENT_AFTER",
    "THIS",
    "Convergence",
    "Standing",
    "judge",
]

SILENT_AFTER = 24 * 3600 * SECOND
"""A replica without a receipt for longer than this is silent (a daemon publishes one at
least every few minutes while it runs)."""

THIS, AGREES, BEHIND, AHEAD, DIFFERS = "this machine", "agrees", "behind", "ahead", "differs"
DIVERGED, EXPIRED_BETWEEN = "DIVERGED", "expired between receipts"
SILENT, NO_RECEIPT, RETIRED = "silent", "no receipt", "retired"

_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class Standing:
    """One replica as this machine sees it."""

    replica: str
    state: str
    detail: str = ""
    receipt_time: int | None = None
    digest: str | None = None
    entries: int | None = None
    version: str | None = None


@dataclass
class Convergence:
    """One memory through one hub: every replica's standing, and the sentence for it."""

    replicas: list[Standing] = field(default_factory=list)

    @property
    def agreeing(self) -> list[str]:
        return [s.replica for s in self.replicas if s.state == AGREES]

    @property
    def diverged(self) -> list[str]:
        return [s.replica for s in self.replicas if s.state == DIVERGED]

    @property
    def in_sync(self) -> bool:
        """Every replica that is neither retired nor silent agrees with this machine."""
        me = next((s for s in self.replicas if s.state == THIS), None)
        if me is None or me.detail:
            return False
        return all(s.state in (THIS, AGREES, RETIRED, SILENT) for s in self.replicas)

    def summary(self) -> str:
        """`in sync with N machine(s)`, or what is not."""
        me = next((s for s in self.replicas if s.state == THIS), None)
        if me is None:
            return "no receipt from this machine yet (run memsync sync)"
        if self.in_sync:
            quiet = [s.replica for s in self.replicas if s.state in (SILENT, RETIRED)]
            tail = f" ({len(quiet)} silent or retired: {', '.join(quiet)})" if quiet else ""
            if not self.agreeing:
                return f"no other machine to compare with{tail}"
            return f"in sync with {len(self.agreeing)} machine(s){tail}"
        parts = [f"this machine {me.detail}"] if me.detail else []
        by_state: dict[str, list[str]] = {}
        for s in self.replicas:
            if s.state not in (THIS, AGREES, RETIRED):
                by_state.setdefault(s.state, []).append(s.replica)
        parts += [f"{state}: {', '.join(names)}" for state, names in by_state.items()]
        agreeing = f"agrees with {len(self.agreeing)} machine(s); " if self.agreeing else ""
        return agreeing + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "in_sync": self.in_sync,
            "summary": self.summary(),
            "replicas": [
                {
                    **asdict(s),
                    "receipt_time": None if s.receipt_time is None else format_ts(s.receipt_time),
                }
                for s in self.replicas
            ],
        }


def _lag(r: Receipt, files: dict[str, int], gens: dict[str, str | None]) -> list[str]:
    """The hub files `r` has not read to their end: `name (read N of M bytes)`."""
    out = []
    for name, size in sorted(files.items()):
        if name == r.replica + _SUFFIX or size == 0:
            continue
        offset, gen = r.read.get(name, (0, None))
        known = gens.get(name)
        if offset < size or (known is not None and gen != known):
            other = " of another generation" if offset >= size else ""
            out.append(f"{name} (read {offset} of {size} bytes{other})")
    return out


def _why(r: Receipt, lag: list[str], local_ahead: str | None = None) -> str:
    """What keeps `r` from holding the hub's records exactly: `behind ...`, `ahead ...`."""
    if lag:
        return f"behind: has not read {', '.join(lag)}"
    if r.unpushed:
        return f"ahead: holds {r.unpushed} live entr(y/ies) the hub does not"
    if local_ahead:
        return f"ahead: {local_ahead}"
    return ""


def _standing(r: Receipt, state: str, detail: str = "") -> Standing:
    return Standing(
        r.replica, state, detail, r.time, f"{r.view.digest:016x}", r.view.entries, r.version
    )


def judge(
    me: str,
    receipts: dict[str, Receipt | None],
    files: dict[str, int],
    *,
    now: int,
    retired: frozenset[str] | set[str] = frozenset(),
    local_ahead: str | None = None,
    silent_after: int = SILENT_AFTER,
) -> Convergence:
    """The standing of every replica of a hub (see the module docstring).

    `receipts`: each replica's receipt (None: unreadable or absent), ours (`me`) included;
    `files`: the hub's replica files (`<replica>.jsonl`) and their sizes now; `local_ahead`:
    what this machine wrote locally since its last push, in words, or None.
    """
    gens = {r.replica + _SUFFIX: r.own[1] for r in receipts.values() if r is not None and r.own}
    names = sorted({n[: -len(_SUFFIX)] for n in files} | set(receipts))
    mine = receipts.get(me)
    out = Convergence()
    my_why = "" if mine is None else _why(mine, _lag(mine, files, gens), local_ahead)
    if mine is not None:
        out.replicas.append(_standing(mine, THIS, my_why))
    for name in names:
        if name == me:
            continue
        r = receipts.get(name)
        if name in retired:
            out.replicas.append(
                Standing(name, RETIRED, "memsync forget-replica", None if r is None else r.time)
            )
            continue
        if r is None:
            detail = "an older memsync, not synced since, or sealed under a key not held here"
            out.replicas.append(Standing(name, NO_RECEIPT, detail))
            continue
        if now - r.time > silent_after:
            detail = (
                f"last seen {format_ts(r.time)}; if it is retired: memsync forget-replica {name}"
            )
            out.replicas.append(_standing(r, SILENT, detail))
            continue
        if mine is not None and r.view.digest == mine.view.digest:
            out.replicas.append(_standing(r, AGREES))
            continue
        out.replicas.append(_compare(r, mine, my_why, files, gens))
    return out


def _compare(
    r: Receipt,
    mine: Receipt | None,
    my_why: str,
    files: dict[str, int],
    gens: dict[str, str | None],
) -> Standing:
    """A peer whose digest is not ours: why."""
    why = _why(r, _lag(r, files, gens))
    if why:
        state, _, detail = why.partition(": ")
        return _standing(r, state, detail)
    if mine is None:
        return _standing(r, DIFFERS, "this machine has no receipt yet")
    if my_why:
        return _standing(r, DIFFERS, f"this machine is {my_why}")
    early, late = (r, mine) if r.time <= mine.time else (mine, r)
    if early.view.valid_until is not None and early.view.valid_until <= late.time:
        return _standing(
            r,
            EXPIRED_BETWEEN,
            f"an entry expired at {format_ts(early.view.valid_until)}, between the receipts "
            "(rule 11); both views agree again once both sync after it",
        )
    version = f"memsync {r.version} there, {mine.version} here"
    return _standing(
        r,
        DIVERGED,
        f"the same records read, a different view ({version}): a bug or a version "
        f"difference; `memsync diff {r.replica}` names the entries",
    )
