"""Commands between machines: sync, check-config, daemon, status, forget-replica."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.cli._common import (
    EXIT_FOUND,
    EXIT_OK,
)
from memsync.core.render import token
from memsync.core.timestamps import format_ts
from memsync.errors import UsageError, shown
from memsync.local.fresh import now_us

# The config (pydantic), the hub and the status document are imported inside the commands
# that use them, so that `memsync add` does not pay for them (issue 14: start-up time).
if TYPE_CHECKING:
    from memsync.config import Config

__all__ = [
    "cmd_check_config",
    "cmd_daemon",
    "cmd_forget_replica",
    "cmd_status",
    "cmd_sync",
    "describe_start",
]


# Sync: sync, check-config


def _size(n: int) -> str:
    return (
        f"{n} B"
        if n < 1024
        else f"{n / 1024:.1f} KiB"
        if n < 1 << 20
        else f"{n / (1 << 20):.1f} MiB"
    )


def cmd_sync(args: argparse.Namespace) -> int:
    from memsync.config import default_config_path
    from memsync.config.wiring import sync_config

    # Without a config file, the daemon's embedded default (issue 24, item 17): its one
    # memory "me" and no remote, so there is nothing to sync, which is no error.
    config, config_path = _daemon_config(args.config)
    if args.memory is not None and config.memory_named(args.memory) is None:
        raise UsageError(f"no memory named {shown(args.memory)} in the config")
    if args.remote is not None and args.remote not in {r.name for r in config.remote}:
        raise UsageError(f"no remote named {shown(args.remote)} in the config")
    reports = sync_config(config, memory=args.memory, remote=args.remote)
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=2))
    else:
        if not reports:
            print("nothing to sync: no remote is configured for these memories")
        if config_path is None:
            for line in _embedded_default_lines(config, default_config_path()):
                print(line)
        for r in reports:
            head = f"{r.memory} <-> {r.remote}:"
            if r.error:
                print(f"{head} FAILED: {r.error}")
                continue
            print(
                f"{head} pulled {r.pulled_records} record(s) ({_size(r.pulled_bytes)}), "
                f"pushed {r.pushed_records} record(s) ({_size(r.pushed_bytes)}) "
                f"in {r.seconds:.2f} s"
            )
            for b in r.bad:
                print(f"  bad line: {b['file']}:{b['line']}: {b['reason']} (not merged)")
            for h in r.held:
                print(
                    f"  held: id {token(h['id'])} dated {h['created_at']} (future-dated; merged later)"
                )
            for why in r.skipped:
                print(f"  skipped: {why}")
            for w in r.withheld:
                print(f"  withheld: {_withheld_line(w)}")
    failed = [r for r in reports if not r.ok]
    for r in failed:  # the summary above is for reading; errors also go where errors go
        print(f"memsync: {r.memory} <-> {r.remote}: {r.error}", file=sys.stderr)
    return EXIT_FOUND if failed else EXIT_OK


def _withheld_line(w: dict[str, Any]) -> str:
    """One record not merged or pushed because it looks like a credential (issue 13, 6)."""
    return (
        f"{w['file']}:{w['line']}: id {w['id']} looks like it holds a credential "
        f"({', '.join(w['looks_like'])}); not merged, not pushed: remove it where it was "
        "written (`memsync forget <id>` there)"
    )


def cmd_check_config(args: argparse.Namespace) -> int:
    from memsync.config import default_config_path, load_config

    path = args.config if args.config is not None else default_config_path()
    config = load_config(path)
    print(json.dumps(config.to_display_dict(), indent=2))
    print(f"{path}: ok", file=sys.stderr)
    return EXIT_OK


# The daemon: daemon, status


def _daemon_config(path: Path | None) -> tuple[Config, Path | None]:
    """The config the daemon runs: --config (which must exist), else the default path when
    a file is there, else the embedded default."""
    from memsync.config import default_config, default_config_path, load_config

    if path is not None:
        return load_config(path), path
    default = default_config_path()
    if default.exists():
        return load_config(default), default
    return default_config(), None


def _daemon_logging(level_name: str, verbose: int) -> None:
    level = getattr(logging, level_name.upper(), logging.INFO)
    if verbose:
        level = logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    # journald stamps each line itself; a terminal gets the time.
    fmt = (
        "%(levelname)s %(message)s"
        if os.environ.get("JOURNAL_STREAM")
        else ("%(asctime)s %(levelname)s %(message)s")
    )
    handler.setFormatter(logging.Formatter(fmt))
    for name in ("memsync", "apscheduler", "paramiko", "watchfiles"):
        log = logging.getLogger(name)
        log.handlers[:] = [handler]
        log.propagate = False
        log.setLevel(level if name == "memsync" else max(level, logging.WARNING))
    logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)  # its own tracebacks


def cmd_daemon(args: argparse.Namespace) -> int:
    from memsync.config import default_config_path
    from memsync.daemon import Daemon

    config, path = _daemon_config(args.config)
    _daemon_logging(config.daemon.log_level, args.verbose)
    # Logged by the daemon once it holds the PID lock: a second daemon only says why not.
    return Daemon(config, path).run(describe_start(config, path, default_config_path()))


def cmd_status(args: argparse.Namespace) -> int:
    from memsync.cli._convergence import (
        convergence_json,
        convergence_lines,
        convergence_problems,
        convergence_rows,
    )
    from memsync.config.wiring import state_of
    from memsync.daemon.bridge_status import bridge_line
    from memsync.daemon.status import compaction_line, daemon_running, evaluate, read_status
    from memsync.daemon.status import to_json as status_json

    config, _ = _daemon_config(args.config)
    state_dir = state_of(config)
    status = read_status(state_dir)
    now = now_us()
    verdict = evaluate(status, daemon_running(state_dir), now)
    # issue 21: the receipts in each hub, read now unless --cached
    rows = convergence_rows(config, now, live=not args.cached)
    verdict.problems.extend(convergence_problems(rows))
    if args.json:
        doc = json.loads(status_json(status, verdict))
        doc["convergence"] = convergence_json(rows)
        print(json.dumps(doc, indent=2))
        return EXIT_OK if verdict.ok else EXIT_FOUND
    if verdict.running and status is not None:
        print(f"daemon: running (pid {status.pid}), replica {status.replica!r}")
    else:
        print("daemon: NOT RUNNING")
    if status is not None:
        print(
            f"status written: {format_ts(status.updated_at)}{' (STALE)' if verdict.stale else ''}"
        )
        print(f"{'MEMORY':<12} {'REMOTE':<12} {'LAST SYNC':<26} {'IN':>6} {'OUT':>6}  STATE")
        for mname, mem in status.memories.items():
            if not mem.remotes:
                print(
                    f"{mname:<12} {'-':<12} {'-':<26} {'-':>6} {'-':>6}  local only; "
                    f"{mem.bad_lines} bad line(s)"
                )
            for rname, r in mem.remotes.items():
                last = format_ts(r.last_success) if r.last_success else "never"
                state = "ok" if r.last_error is None else f"FAILING: {r.last_error}"
                if r.held:
                    state += f"; {len(r.held)} future-dated record(s) held"
                if r.write_mode:
                    state += f"; S3 writes: {r.write_mode}"
                if r.skipped:
                    state += f"; {len(r.skipped)} peer file(s) skipped: {'; '.join(r.skipped)}"
                if r.withheld:
                    state += f"; {len(r.withheld)} record(s) withheld (they look like credentials)"
                print(
                    f"{mname:<12} {rname:<12} {last:<26} {r.records_in:>6} {r.records_out:>6}  {state}"
                )
        for mname, mem in status.memories.items():
            if (line := compaction_line(mname, mem, now)) is not None:
                print(line)
        for path, bridge in status.bridges.items():
            print(bridge_line(path, bridge))
    for line in convergence_lines(rows):
        print(line)
    for problem in verdict.problems:
        print(f"problem: {problem}")
    return EXIT_OK if verdict.ok else EXIT_FOUND


def cmd_forget_replica(args: argparse.Namespace) -> int:
    from memsync.config.wiring import state_of
    from memsync.core.names import valid_replica
    from memsync.hub.state import retired, set_retired

    if not valid_replica(args.replica):
        raise UsageError(
            f"{shown(args.replica)} is not a replica id (1 to 64 of A-Z a-z 0-9 . _ -, not starting "
            "with '.'); `memsync status` lists the replicas of each hub"
        )
    config, _ = _daemon_config(args.config)
    state_dir = state_of(config)
    names = retired(state_dir)
    if args.undo:
        names.discard(args.replica)
        verb = "no longer retired"
    else:
        names.add(args.replica)
        verb = "retired: compaction no longer waits for it to read tombstones"
    set_retired(state_dir, names)
    print(f"replica {args.replica!r} {verb}")
    return EXIT_OK


def describe_start(config: Config, config_path: Path | None, default_path: Path) -> list[str]:
    """The first log lines: what the daemon watches and, on the embedded default, how to
    add a remote."""
    lines = []
    for mem in config.memory:
        remotes = ", ".join(rc.name for rc in config.memory_remotes(mem)) or "no remotes"
        lines.append(f"watching {mem.path} (memory {mem.name!r}; {remotes})")
    if config_path is None:
        lines += _embedded_default_lines(config, default_path)
    lines.append(f"compaction schedule: {config.compaction.schedule!r} (local time)")
    lines.append(f"state directory: {config.state_dir}")
    return lines


def _embedded_default_lines(config: Config, default_path: Path) -> list[str]:
    """What the daemon and `sync` say when no config file exists: the embedded default, how
    to add a remote, and where the former default file is (issue 24, item 17)."""
    from memsync.local.dirs import FORMER_DEFAULT_MEMORY_FILE, former_default_beside

    lines = [
        (
            f"no config file at {default_path}: running on the embedded default "
            "(validation and scheduled compaction only)"
        ),
        (
            f"to sync with other machines, write {default_path} with a [[remote]] "
            "(see config.example.toml), then restart the daemon"
        ),
    ]
    [mem] = config.memory
    if mem.path.name == FORMER_DEFAULT_MEMORY_FILE:
        lines.append(
            f"memory {mem.name!r} is kept in {mem.path}, the former default file, since "
            f"{mem.path.with_name(mem.name + '.jsonl')} does not exist"
        )
    elif (former := former_default_beside(mem.path)) is not None:
        lines.append(
            f"{former}, the former default file, is no longer the default memory: add its "
            f"entries to memory {mem.name!r} with `memsync merge {former} --into {mem.path}`"
        )
    return lines
