"""The `memsync` command line: parse argv, call the library, map errors to exit codes once.

Exit codes: 0 success; 1 something was found or failed (`check` findings, a failed remote);
2 a usage, input or I/O error; 3 compaction did not start (the file is busy; retry later).
Every error is one line on stderr, `memsync: <what went wrong>`, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from memsync import __version__
from memsync.config import (
    Config,
    default_config,
    default_config_path,
    default_state_dir,
    load_config,
)
from memsync.core.prompt import scope_matches
from memsync.core.records import KINDS, Record
from memsync.core.timestamps import format_ts, parse_ts
from memsync.errors import MemsyncError, NotQuiet
from memsync.hub import retired, set_retired
from memsync.hubcompact import acknowledged_for
from memsync.keycli import register as _register_key_commands  # issue 12
from memsync.memfile import Memory, check_files, no_gc, now_us, prompt_of, view_of
from memsync.merging import HandoffFilter, MergeResult, handoff, merge_files, merge_indexed
from memsync.status import daemon_running, evaluate, read_status
from memsync.status import to_json as status_json
from memsync.sync import sync_config
from memsync.syncstate import resolve_replica

__all__ = ["main"]

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_NOT_QUIET = 0, 1, 2, 3

Handler = Callable[[argparse.Namespace], int]


class UsageError(MemsyncError):
    """A command line that cannot be carried out as written."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one `memsync: ...` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == "memsync" else f"{self.prog}: "
        raise UsageError(f"{where}{message} (see --help)")


def _timestamp(text: str) -> int:
    us = parse_ts(text)
    if us is None:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 timestamp with a zone: {text!r}")
    return us


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"confidence must be from 0 to 1, not {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


# Commands of the core: add, forget, show, prompt, check


def cmd_add(args: argparse.Namespace) -> int:
    mem = Memory.open(args.file)
    entry = mem.add(
        args.kind,
        args.text,
        scope=args.scope,
        tags=args.tag,
        source=args.source,
        confidence=args.confidence,
        expires_at=format_ts(args.expires_at) if args.expires_at is not None else None,
        supersedes=args.supersedes,
    )
    print(entry.id)
    return EXIT_OK


def cmd_forget(args: argparse.Namespace) -> int:
    Memory.open(args.file, create=False).forget(args.id)
    return EXIT_OK


def _existing(paths: Sequence[Path]) -> list[Path]:
    for p in paths:
        if not p.is_file():
            raise UsageError(f"{p}: no such memory file")
    return list(paths)


def cmd_show(args: argparse.Namespace) -> int:
    with no_gc():  # a million records hold no cycles: the cyclic GC would walk them in vain
        return _show(args)


def _show(args: argparse.Namespace) -> int:
    view = view_of(_existing(args.files), args.now)
    records = view.records
    if args.scope is not None or args.kind:
        kept = []
        for rec in records:
            obj = rec.fields()
            if args.kind and obj["kind"] not in args.kind:
                continue
            if args.scope is not None and not scope_matches(obj.get("scope", "global"), args.scope):
                continue
            kept.append(rec)
        records = kept
    out = sys.stdout.buffer
    if args.json:
        # The record objects exactly as written in their lines (rule 5), as one JSON array.
        out.write(b"[")
        for i, rec in enumerate(records):  # streamed: no second copy of every line
            out.write(b",\n" + rec.raw.rstrip(b"\r") if i else rec.raw.rstrip(b"\r"))
        out.write(b"]\n")
    else:
        for rec in records:
            obj = rec.fields()
            scope = obj.get("scope", "global")
            who = " user" if rec.user else ""
            line = f"{rec.id}  {format_ts(rec.ts)}  {obj['kind']:<10} {scope}{who}  {obj['text']}"
            out.write(line.encode("utf-8", "replace") + b"\n")
    out.flush()
    _report_bad(view.bad)
    return EXIT_OK


def _report_bad(bad: Sequence[object]) -> None:
    if bad:
        logging.getLogger("memsync").warning(
            "%d bad line(s) skipped; `memsync check` lists them", len(bad)
        )


def cmd_prompt(args: argparse.Namespace) -> int:
    with no_gc():  # a million records hold no cycles: the cyclic GC would walk them in vain
        return _prompt(args)


def _prompt(args: argparse.Namespace) -> int:
    view = view_of(_existing(args.files), args.now)
    sys.stdout.write(prompt_of(view.records, args.scope, args.max_chars))
    _report_bad(view.bad)
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with no_gc():  # a million records hold no cycles: the cyclic GC would walk them in vain
        return _check(args)


def _check(args: argparse.Namespace) -> int:
    report = check_files(_existing(args.files), args.now)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        for b in report.bad:
            print(f"bad line: {b.file}:{b.line}: {b.reason}")
        for a, _ in report.twins:
            print(f"twins: id {a.id} at {format_ts(a.ts)} has two different contents")
        for s in report.secrets:
            print(f"secret: {s.file}:{s.line}: looks like {s.what}")
        for f, n, r in report.future:
            print(f"future: {f}:{n}: id {r.id} dated {format_ts(r.ts)}, ahead of this clock")
        if report.clean:
            print("clean")
    return EXIT_OK if report.clean else EXIT_FOUND


# Merging: merge, handoff


def _print_merge(result: MergeResult, as_json: bool, *, show_records: bool = False) -> None:
    if as_json:
        doc = result.to_json()
        if show_records:
            doc["records"] = [json.loads(r.raw) for r in result.records]
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    verb = "would append" if result.dry_run else "appended"
    print(
        f"{result.dest}: {verb} {result.appended} record(s) ({result.bytes_appended} bytes); "
        f"{result.duplicates} duplicate(s) and {result.beaten} beaten version(s) skipped"
    )
    if show_records:
        for rec in result.records:
            print(f"  + {rec.raw.decode('utf-8', 'replace')}")
    for h in result.held:
        print(
            f"held: {h['file']}:{h['line']}: id {h['id']} dated {h['created_at']}, more "
            "than 24 h ahead of this clock; it will be merged when its time comes"
        )
    for b in result.bad:
        print(f"bad line: {b['file']}:{b['line']}: {b['reason']} (not merged)")
    for t in result.twins:
        print(f"twins: id {t['id']} at {t['created_at']} has two different contents (both kept)")


def cmd_merge(args: argparse.Namespace) -> int:
    sources = _existing(args.sources)
    if any(src.resolve() == args.into.resolve() for src in sources):
        raise UsageError(f"{args.into}: cannot merge a file into itself")
    if args.no_index:
        result = merge_files(args.into, sources, now=args.now, dry_run=args.dry_run)
    else:
        result = merge_indexed(
            args.into, sources, default_state_dir(), now=args.now, dry_run=args.dry_run
        )
    _print_merge(result, args.json)
    return EXIT_OK


def cmd_handoff(args: argparse.Namespace) -> int:
    [src] = _existing([args.src])
    if src.resolve() == args.dest.resolve():
        raise UsageError(f"{args.dest}: cannot hand a file off to itself")
    selection = HandoffFilter(
        scopes=tuple(args.scope),
        kinds=tuple(args.kind),
        min_confidence=args.min_confidence,
        since=args.since,
    )
    result = handoff(src, args.dest, selection, now=args.now, dry_run=args.dry_run)
    _print_merge(result, args.json, show_records=args.dry_run)
    return EXIT_OK


# Compaction


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _acknowledgement(path: Path, config_path: Path | None) -> Callable[[Record], bool] | None:
    """For a file that is a configured memory with remotes, the hub's word on which
    tombstones every replica has read (rule 15); None (all of them) for a file no hub
    shares."""
    config_file = config_path if config_path is not None else default_config_path()
    if config_path is None and not config_file.exists():
        return None
    config = load_config(config_file)
    for mem in config.memory:
        if mem.path.exists() and mem.path.samefile(path):
            remotes = [rc.name for rc in config.memory_remotes(mem)]
            replica = resolve_replica(config.replica, config.state_dir)
            return acknowledged_for(config.state_dir, mem.name, remotes, replica)
    return None


def cmd_compact(args: argparse.Namespace) -> int:
    from memsync.compaction import compact_file, rejected_path

    [path] = _existing([args.file])
    result = compact_file(
        path,
        now=args.now,
        horizon_days=args.horizon_days,
        quiet_seconds=args.quiet_seconds,
        grace_seconds=args.grace_seconds,
        dry_run=args.dry_run,
        acknowledged=_acknowledgement(path, args.config),
    )
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return EXIT_OK
    if not result.dry_run and not result.rewritten:
        print(f"{path}: nothing to compact ({result.size_before:,} bytes, {result.kept:,} records)")
        return EXIT_OK
    print(
        f"{path}{' (dry run)' if result.dry_run else ''}: "
        f"{result.size_before:,} -> {result.size_after:,} bytes "
        f"({result.lines_before:,} -> {result.lines_after:,} lines; {result.kept:,} records kept)"
    )
    dropped = ", ".join(f"{n:,} {reason}" for reason, n in result.dropped.items())
    print(f"{'would drop' if result.dry_run else 'dropped'}: {dropped or 'nothing'}")
    if result.rejected:
        verb = "would move" if result.dry_run else "moved"
        print(f"bad lines: {verb} {result.rejected:,} to {rejected_path(path)}")
    if result.pinned:
        print(f"kept {result.pinned:,} old tombstone(s) that superseding records need")
    if result.drained:
        print(f"copied {result.drained:,} line(s) appended during the compaction")
    return EXIT_OK


# Sync: sync, check-config


def _load_config(path: Path | None) -> Config:
    config_path = path if path is not None else default_config_path()
    if path is None and not config_path.exists():
        raise UsageError(
            f"{config_path}: no config file; copy config.example.toml there (or pass "
            "--config PATH, or set MEMSYNC_CONFIG) and add a remote"
        )
    return load_config(config_path)


def _size(n: int) -> str:
    return (
        f"{n} B"
        if n < 1024
        else f"{n / 1024:.1f} KiB"
        if n < 1 << 20
        else f"{n / (1 << 20):.1f} MiB"
    )


def cmd_sync(args: argparse.Namespace) -> int:
    config = _load_config(args.config)
    names = {m.name for m in config.memory}
    if args.memory is not None and args.memory not in names:
        raise UsageError(f"no memory named {args.memory!r} in the config")
    if args.remote is not None and args.remote not in {r.name for r in config.remote}:
        raise UsageError(f"no remote named {args.remote!r} in the config")
    reports = sync_config(config, memory=args.memory, remote=args.remote)
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=2))
    else:
        if not reports:
            print("nothing to sync: no remote is configured for these memories")
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
                print(f"  held: id {h['id']} dated {h['created_at']} (future-dated; merged later)")
    failed = [r for r in reports if not r.ok]
    for r in failed:  # the summary above is for reading; errors also go where errors go
        print(f"memsync: {r.memory} <-> {r.remote}: {r.error}", file=sys.stderr)
    return EXIT_FOUND if failed else EXIT_OK


def cmd_check_config(args: argparse.Namespace) -> int:
    path = args.config if args.config is not None else default_config_path()
    config = load_config(path)
    print(json.dumps(config.to_display_dict(), indent=2))
    print(f"{path}: ok", file=sys.stderr)
    return EXIT_OK


# The daemon: daemon, status


def _daemon_config(path: Path | None) -> tuple[Config, Path | None]:
    """The config the daemon runs: --config (which must exist), else the default path when
    a file is there, else the embedded default."""
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
    from memsync.daemon import Daemon, describe_start

    config, path = _daemon_config(args.config)
    _daemon_logging(config.daemon.log_level, args.verbose)
    # Logged by the daemon once it holds the PID lock: a second daemon only says why not.
    return Daemon(config, path).run(describe_start(config, path, default_config_path()))


def cmd_status(args: argparse.Namespace) -> int:
    config, _ = _daemon_config(args.config)
    state_dir = config.state_dir
    status = read_status(state_dir)
    verdict = evaluate(status, daemon_running(state_dir), now_us())
    if args.json:
        print(status_json(status, verdict))
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
                print(
                    f"{mname:<12} {rname:<12} {last:<26} {r.records_in:>6} {r.records_out:>6}  {state}"
                )
    for problem in verdict.problems:
        print(f"problem: {problem}")
    return EXIT_OK if verdict.ok else EXIT_FOUND


def cmd_forget_replica(args: argparse.Namespace) -> int:
    config, _ = _daemon_config(args.config)
    names = retired(config.state_dir)
    if args.undo:
        names.discard(args.replica)
        verb = "no longer retired"
    else:
        names.add(args.replica)
        verb = "retired: compaction no longer waits for it to read tombstones"
    set_retired(config.state_dir, names)
    print(f"replica {args.replica!r} {verb}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memsync",
        description="Keep agent memory files consistent across machines and agents.",
    )
    parser.add_argument("--version", action="version", version=f"memsync {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("add", help="append a new entry; prints its id")
    p.add_argument("file", type=Path)
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("--text", required=True)
    p.add_argument("--scope", default="global")
    p.add_argument("--tag", action="append", default=[], help="repeat for several tags")
    p.add_argument("--source", default=None, help='where it was learned; "user" if the person')
    p.add_argument("--confidence", type=_confidence, default=1.0)
    p.add_argument("--expires-at", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--supersedes", default=None, metavar="ID")
    p.set_defaults(handler=cmd_add)

    p = sub.add_parser("forget", help="append a tombstone for an id")
    p.add_argument("file", type=Path)
    p.add_argument("id")
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser("show", help="the view of one or more files together")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--scope", default=None)
    p.add_argument("--kind", action="append", choices=KINDS, default=[])
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--json", action="store_true", help="a JSON array of the live records")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("prompt", help="the memory block for an agent's context")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--scope", default=None)
    p.add_argument("--max-chars", type=_positive_int, default=None, metavar="N")
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.set_defaults(handler=cmd_prompt)

    p = sub.add_parser("check", help="bad lines, twins, secrets, future-dated records")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("merge", help="append to DEST the records of SRC... that it lacks")
    p.add_argument("sources", type=Path, nargs="+", metavar="SRC")
    p.add_argument("--into", type=Path, required=True, metavar="DEST")
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--dry-run", action="store_true", help="say what would be appended")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--no-index",
        action="store_true",
        help="a one-off merge: read everything, keep no index in the state directory",
    )
    p.set_defaults(handler=cmd_merge)

    p = sub.add_parser("handoff", help="hand a memory, or a slice of it, to another agent")
    p.add_argument("src", type=Path, metavar="SRC")
    p.add_argument("dest", type=Path, metavar="DEST")
    p.add_argument("--scope", action="append", default=[], help="repeat for several")
    p.add_argument("--kind", action="append", choices=KINDS, default=[])
    p.add_argument("--min-confidence", type=_confidence, default=None, metavar="F")
    p.add_argument("--since", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.add_argument("--dry-run", action="store_true", help="list what would be appended")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_handoff)

    p = sub.add_parser("compact", help="rewrite a file with only what its view needs")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="when FILE is a configured memory, tombstones go only once every replica read them",
    )
    p.add_argument("--now", type=_timestamp, default=None, metavar="TS")
    p.add_argument(
        "--horizon-days",
        type=_non_negative,
        default=90.0,
        metavar="N",
        help="tombstones older than this may go (default 90)",
    )
    p.add_argument(
        "--quiet-seconds",
        type=_non_negative,
        default=60.0,
        metavar="N",
        help="start only if the file has not changed for this long (default 60)",
    )
    p.add_argument(
        "--grace-seconds",
        type=_non_negative,
        default=5.0,
        metavar="N",
        help="how long at most to copy late writes to the old file (default 5)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be dropped")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_compact)

    p = sub.add_parser("sync", help="one pass of pull, merge and push with the remotes")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument("--memory", default=None, metavar="NAME")
    p.add_argument("--remote", default=None, metavar="NAME")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_sync)

    p = sub.add_parser("check-config", help="validate a config file and print it resolved")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=cmd_check_config)

    p = sub.add_parser("daemon", help="run in the foreground, keeping memories in sync")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=cmd_daemon)

    p = sub.add_parser("status", help="what the daemon is doing; exit 1 when something is wrong")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("forget-replica", help="stop waiting for a retired replica")
    p.add_argument("replica", metavar="NAME")
    p.add_argument("--undo", action="store_true", help="take a replica back")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=cmd_forget_replica)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction[_Parser]], None]] = []
_EXTRA_COMMANDS.append(_register_key_commands)  # issue 12: memsync key ...


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memsync: %(message)s"))
    root = logging.getLogger("memsync")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (see the module docstring)."""
    try:
        args = build_parser().parse_args(argv)
        _setup_logging(args.verbose)
        handler: Handler = args.handler
        return handler(args)
    except NotQuiet as exc:
        print(f"memsync: {exc}", file=sys.stderr)
        return EXIT_NOT_QUIET
    except MemsyncError as exc:
        print(f"memsync: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"memsync: {_os_error(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def _os_error(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror.lower()}"
    return str(exc)
