"""Convergence in `memsync status` (issue 21): which machines hold the same memory, and how
the others differ; and `memsync diff`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from memsync.cli._common import EXIT_FOUND, EXIT_OK
from memsync.core.convergence import DIVERGED, Standing
from memsync.core.render import json_text, token
from memsync.core.timestamps import format_ts
from memsync.errors import UsageError, shown

if TYPE_CHECKING:
    from memsync.config import Config
    from memsync.config.model import MemoryConfig, RemoteConfig
    from memsync.config.wiring import ConvergenceRow

__all__ = [
    "cmd_diff",
    "convergence_json",
    "convergence_lines",
    "convergence_problems",
    "convergence_rows",
]


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


def _config_and_choice(args: argparse.Namespace) -> tuple[Config, MemoryConfig, RemoteConfig]:
    """The config, and the memory and remote `diff` compares through (the only ones when
    left out)."""
    from memsync.config import default_config, default_config_path, load_config

    # As the daemon and `status` read it: --config, else the default file, else the
    # embedded default (which has no remote: diff then says so).
    path = args.config if args.config is not None else default_config_path()
    config = load_config(path) if args.config is not None or path.exists() else default_config()
    mems = [m for m in config.memory if args.memory in (None, m.name)]
    if not mems:
        raise UsageError(f"no memory named {shown(args.memory)} in the config")
    if len(mems) > 1:
        raise UsageError("several memories are configured: name one with --memory NAME")
    remotes = [r for r in config.memory_remotes(mems[0]) if args.remote in (None, r.name)]
    if not remotes:
        what = "no remote" if args.remote is None else f"no remote named {shown(args.remote)}"
        raise UsageError(f"{what} for memory {mems[0].name!r} in the config")
    if len(remotes) > 1:
        raise UsageError("the memory syncs with several remotes: name one with --remote NAME")
    return config, mems[0], remotes[0]


def _entry(raw: bytes | None) -> dict[str, Any] | None:
    return None if raw is None else dict(json.loads(raw))


def _text(raw: bytes) -> str:
    obj = json.loads(raw)
    text = obj.get("text")
    return token(text if isinstance(text, str) else "", escaped=True)


def cmd_diff(args: argparse.Namespace) -> int:
    """`memsync diff REPLICA`: the entries that differ between this machine's view and
    REPLICA's (exit 1 when some do)."""
    from memsync.config.wiring import codec_for, open_remote, state_of
    from memsync.core.names import valid_replica
    from memsync.hub.diff import diff_replica
    from memsync.hub.state import resolve_replica
    from memsync.local.fresh import now_us

    if not valid_replica(args.replica):
        raise UsageError(f"{shown(args.replica)} is not a replica id")
    config, mem, rc = _config_and_choice(args)
    state = state_of(config)
    transport = open_remote(rc)
    try:
        report = diff_replica(
            memory=mem.name,
            remote=rc.name,
            local=mem.path,
            replica=resolve_replica(config.replica, state),
            peer=args.replica,
            state_dir=state,
            transport=transport,
            codec=codec_for(rc, config, mem.name),
            now=now_us(),
        )
    finally:
        transport.close()
    if args.json:
        doc = {
            "memory": mem.name,
            "remote": rc.name,
            "replica": args.replica,
            "receipt_time": format_ts(report.peer.time),
            "buckets": report.buckets,
            "unresolved": report.unresolved,
            "hub_bytes": report.hub_bytes,
            "differences": [
                {"id": d.id, "here": _entry(d.here), "there": _entry(d.there)}
                for d in report.differences
            ],
        }
        print(json_text(json.dumps(doc, indent=2, ensure_ascii=False)))
        return EXIT_FOUND if report.buckets else EXIT_OK
    head = f"{mem.name}: this machine and {token(args.replica)} (receipt {format_ts(report.peer.time)})"
    if not report.buckets:
        print(f"{head}: the same view ({report.hub_bytes} bytes read from {rc.name})")
        return EXIT_OK
    print(
        f"{head}: {len(report.differences)} entr(y/ies) differ, in {len(report.buckets)} "
        f"bucket(s) of ids ({report.hub_bytes} bytes read from {rc.name})"
    )
    for d in report.differences:
        if d.there is None and d.here is not None:
            print(f"  {token(d.id)}  only here: {_text(d.here)}")
        elif d.here is None and d.there is not None:
            print(f"  {token(d.id)}  only there: {_text(d.there)}")
        elif d.here is not None and d.there is not None:
            print(f"  {token(d.id)}  here: {_text(d.here)}  there: {_text(d.there)}")
    if report.unresolved:
        print(
            f"  {len(report.unresolved)} bucket(s) of ids could not be rebuilt as "
            f"{token(args.replica)} holds them (entries it never pushed, or a view that "
            "differs over the same records: diverged); the entries listed may be incomplete"
        )
    return EXIT_FOUND
