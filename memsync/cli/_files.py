"""Commands that read memory files: show, check, merge, handoff, compact (`add` and `forget`
are in `_writes`: they start without the view machinery; `prompt` in `_prompt`)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from memsync.cli._common import (
    EXIT_FOUND,
    EXIT_OK,
    buffered_stdout,
    existing,
    report_bad,
)
from memsync.core.digest import digest_of, record_hash
from memsync.core.records import Described, Record
from memsync.core.render import json_text, token, visible
from memsync.core.timestamps import format_ts
from memsync.core.view import selector
from memsync.errors import UsageError
from memsync.local.reading import no_gc
from memsync.local.targets import require_memory_target, same_file

# What the agents' everyday commands (show, prompt, check) do not need is
# imported inside the commands that do: the merge's SQLite index, the config (pydantic),
# the hub (issue 14: start-up time).
if TYPE_CHECKING:
    from memsync.local.located import LocatedView
    from memsync.local.merge import MergeResult
    from memsync.local.viewstore import ViewStore

__all__ = [
    "cmd_check",
    "cmd_compact",
    "cmd_handoff",
    "cmd_merge",
    "cmd_show",
]


# Commands of the core: show, prompt, check


def cmd_show(args: argparse.Namespace) -> int:
    with no_gc():  # a million records hold no cycles: the cyclic GC would walk them in vain
        return _show(args)


def _show(args: argparse.Namespace) -> int:
    # Two passes (issue 14): the view holds where each live line is, not the line.
    keep = selector(scope=args.scope, kinds=args.kind)
    files = existing(args.files)
    whole = args.json and keep is None and not args.digest
    if whole and len(files) == 1 and _show_stored(files[0], args.now):
        return EXIT_OK
    # The whole file as JSON without a valid quick part reads every line, and writes no
    # persistent view: the export must not need the state directory (nor its room).
    store = None if whole else _view_store()
    from memsync.local.located import located_view  # (start-up: `prompt` may not need it)

    with located_view(files, args.now, store, hashes=args.digest) as view:
        if keep is not None and view.described:
            # The persistent view knows each entry's kind and scope: only the lines of
            # those the filter keeps are read (issue 20); the others are tested below.
            view.records = [
                r
                for r in view.records
                if type(r) is not Described or keep({"kind": r.kind, "scope": r.scope})
            ]
        if args.digest:
            print(digest_of(_selected_hashes(view, keep)))
            report_bad(view.scan.bad, view.scan.headerless)
            return EXIT_OK
        with buffered_stdout() as out:
            _write_shown(out, view, keep, json_array=args.json)
    report_bad(view.scan.bad, view.scan.headerless)
    return EXIT_OK


def _show_stored(path: Path, now: int | None) -> bool:
    """`show --json` of memory file `path` from the quick part of its persistent view,
    when it has a valid one (issue 20: the lines of the live versions read where they
    lie, no line folded); False, having written nothing, when it has none."""
    from memsync.local.fresh import now_us
    from memsync.local.viewranks_open import stored_lines

    with stored_lines(_view_store(), path, now_us() if now is None else now) as found:
        if found is None:
            return False
        lines, bad, headerless = found
        with buffered_stdout() as out:
            _write_json_array(out, lines)
    report_bad(bad, headerless)
    return True


def _write_json_array(out: BinaryIO, lines: Iterable[bytes]) -> None:
    """The record objects exactly as written in `lines` (rule 5), as one JSON array,
    streamed: no copy of every line."""
    out.write(b"[")
    first = True
    for raw in lines:
        out.write(raw.rstrip(b"\r") if first else b",\n" + raw.rstrip(b"\r"))
        first = False
    out.write(b"]\n")


def _write_json_runs(out: BinaryIO, runs: Iterable[bytes]) -> None:
    """What `_write_json_array` writes of the lines of `runs` (each the bytes of adjacent
    lines, each line with its "\\n"), a run at a time: its "\\n"s become the array's
    separators in one C pass, instead of a Python step per line (issue 20: a million). A
    run holding a "\\r" (a CRLF line, its "\\r" not part of the object) is written line
    by line."""
    out.write(b"[")
    separator = b""
    for run in runs:
        out.write(separator)
        if b"\r" in run:
            lines = run.split(b"\n")
            lines.pop()  # the empty piece after the last "\n"
            out.write(b",\n".join([raw.rstrip(b"\r") for raw in lines]))
        else:  # the last "\n" became a separator too: left out, without a copy
            out.write(memoryview(run.replace(b"\n", b",\n"))[:-2])
        separator = b",\n"
    out.write(b"]\n")


def _write_shown(
    out: BinaryIO,
    view: LocatedView,
    keep: Callable[[dict[str, Any]], bool] | None,
    *,
    json_array: bool,
) -> None:
    """The view's records that `keep` keeps (all when None) to `out`: one line each, or
    with `json_array` the record objects exactly as written in their lines (rule 5), as
    one JSON array, streamed (no copy of every line)."""
    if json_array and keep is None:
        _write_json_runs(out, view.runs())
        return
    if json_array:
        _write_json_array(out, _selected(view.lines(), keep))
        return
    for rec, raw in zip(view.records, view.lines(), strict=True):
        obj: dict[str, Any] = msgspec.json.decode(raw)
        if keep is None or keep(obj):
            out.write(_show_line(rec, obj))


def _view_store() -> ViewStore:
    """The persistent views of memory files in the default state directory (issue 20),
    a large file's written by a detached process while the command answers."""
    from memsync.local.statedir import StateDir
    from memsync.local.viewstore import DETACH_BYTES, ViewStore

    return ViewStore(StateDir.of(), detach_from=DETACH_BYTES)


def _selected(
    lines: Iterable[bytes], keep: Callable[[dict[str, Any]], bool] | None
) -> Iterator[bytes]:
    """The lines of `lines` whose record `keep` keeps (all when `keep` is None)."""
    for raw in lines:
        if keep is None or keep(msgspec.json.decode(raw)):
            yield raw


def _selected_hashes(
    view: LocatedView, keep: Callable[[dict[str, Any]], bool] | None
) -> Iterator[int]:
    """The `record_hash` of each of the view's records that `keep` keeps (all when None),
    in any order: the persistent view's when it keeps them (issue 21: no line read), and
    those of the lines read again for the others (a `Described` record was already
    selected by its kind and scope, the others are selected by their line)."""
    if keep is None:
        return view.hashes()
    described = [r for r in view.records if type(r) is Described]
    others = [r for r in view.records if type(r) is not Described]
    return chain(
        view.hashes_of(described), map(record_hash, _selected(view.lines_of(others), keep))
    )


def _show_line(rec: Record, obj: dict[str, Any]) -> bytes:
    """`show`'s line for one record: id, created_at, kind, scope, "user", and text.

    Rendered by `memsync.core.render` (SEMANTICS rule 17): control characters written as
    escapes (`\\x1b`: a person inspecting a file sees what is there, and a record cannot
    drive the terminal or start a line), and the id and scope quoted when they hold a space
    or a delimiter, so that memsync's "user" after the scope cannot be forged by one.
    """
    scope = token(str(obj.get("scope", "global")), escaped=True)
    who = " user" if rec.user else ""
    text = visible(str(obj["text"]))
    rid = token(rec.id, escaped=True)
    line = f"{rid}  {format_ts(rec.ts)}  {obj['kind']:<10} {scope}{who}  {text}"
    return line.encode("utf-8", "replace") + b"\n"


def cmd_check(args: argparse.Namespace) -> int:
    with no_gc():  # a million records hold no cycles: the cyclic GC would walk them in vain
        return _check(args)


def _check(args: argparse.Namespace) -> int:
    from memsync.local.located import check_files

    report = check_files(existing(args.files), args.now)
    if args.json:
        print(json_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False)))
    else:
        for b in report.bad:
            print(f"bad line: {b.file}:{b.line}: {b.reason}")
        for (rid, ts), others in Counter((a.id, a.ts) for a, _ in report.twins).items():
            count = "two" if others == 1 else others + 1
            print(f"twins: id {token(rid)} at {format_ts(ts)} has {count} different contents")
        for s in report.secrets:
            print(f"secret: {s.file}:{s.line}: looks like {s.what}")
        for f, n, r in report.future:
            print(f"future: {f}:{n}: id {token(r.id)} dated {format_ts(r.ts)}, ahead of this clock")
        if report.clean:
            print("clean")
    return EXIT_OK if report.clean else EXIT_FOUND


# Merging: merge, handoff


def _print_merge(result: MergeResult, as_json: bool, *, show_records: bool = False) -> None:
    if as_json:
        doc = result.to_json()
        if show_records:
            doc["records"] = [json.loads(r.raw) for r in result.records]
        print(json_text(json.dumps(doc, indent=2, ensure_ascii=False)))
        return
    verb = "would append" if result.dry_run else "appended"
    print(
        f"{result.dest}: {verb} {result.appended} record(s) ({result.bytes_appended} bytes); "
        f"{result.duplicates} duplicate(s) and {result.beaten} beaten version(s) skipped"
    )
    if show_records:
        for rec in result.records:
            print(f"  + {visible(rec.raw.decode('utf-8', 'replace'))}")  # rule 17: no raw U+2028
    for h in result.held:
        print(
            f"held: {h['file']}:{h['line']}: id {h['id']} dated {h['created_at']}, more "
            "than 24 h ahead of this clock; it will be merged when its time comes"
        )
    for w in result.withheld:
        print(
            f"withheld: {w['file']}:{w['line']}: id {w['id']} looks like it holds a "
            f"credential ({', '.join(w['looks_like'])}); not merged"
        )
    for b in result.bad:
        print(f"bad line: {b['file']}:{b['line']}: {b['reason']} (not merged)")
    for t in result.twins:
        print(
            f"twins: id {token(t['id'])} at {t['created_at']} has two different contents"
            " (both kept)"
        )


def cmd_merge(args: argparse.Namespace) -> int:
    from memsync.local.merge import merge_files, merge_indexed
    from memsync.local.statedir import StateDir

    sources = existing(args.sources)
    if any(src.resolve() == args.into.resolve() or same_file(src, args.into) for src in sources):
        raise UsageError(f"{args.into}: cannot merge a file into itself")
    require_memory_target(args.into)  # never records appended to notes.txt (issue 24, item 6)
    if args.no_index:
        result = merge_files(
            args.into, sources, now=args.now, dry_run=args.dry_run, progress=args.progress
        )
    else:
        result = merge_indexed(
            args.into,
            sources,
            StateDir.of(),
            now=args.now,
            dry_run=args.dry_run,
            progress=args.progress,
        )
    _print_merge(result, args.json)
    return EXIT_OK


def cmd_handoff(args: argparse.Namespace) -> int:
    from memsync.core.handoff import HandoffFilter
    from memsync.local.handoff import handoff

    [src] = existing([args.src])
    if src.resolve() == args.dest.resolve() or same_file(src, args.dest):
        raise UsageError(f"{args.dest}: cannot hand a file off to itself")
    require_memory_target(args.dest)  # never records appended to notes.txt (issue 24, item 6)
    selection = HandoffFilter(
        scopes=tuple(args.within),
        kinds=tuple(args.kind),
        min_confidence=args.min_confidence,
        since=args.since,
    )
    result = handoff(
        src,
        args.dest,
        selection,
        now=args.now,
        dry_run=args.dry_run,
        progress=args.progress,
        store=_view_store(),
    )
    _print_merge(result, args.json, show_records=args.dry_run)
    return EXIT_OK


# Compaction


def _hub_side(path: Path, config_path: Path | None) -> dict[str, Any]:
    """For a file that is a configured memory, what `compact_memory` needs to keep every
    tombstone some replica has not read (rule 15): its name, remotes, replica and state
    directory. Nothing for a file no config names (then every old tombstone may go)."""
    from memsync.config import default_config_path, load_config
    from memsync.config.wiring import state_of
    from memsync.hub.state import resolve_replica

    config_file = config_path if config_path is not None else default_config_path()
    if config_path is None and not config_file.exists():
        return {}
    config = load_config(config_file)
    for mem in config.memory:
        if mem.path.exists() and mem.path.samefile(path):
            remotes = [rc.name for rc in config.memory_remotes(mem)]
            if not remotes:
                return {}
            return {
                "memory": mem.name,
                "remotes": remotes,
                "replica": resolve_replica(config.replica, state_of(config)),
                "state_dir": state_of(config),
            }
    return {}


def cmd_compact(args: argparse.Namespace) -> int:
    from memsync.hub.compaction import compact_memory
    from memsync.local.compaction import rejected_path

    [path] = existing([args.file])
    # The daemon's scheduled job calls the same function, with its open hub connections;
    # here there are none, so only the local file is compacted.
    result = compact_memory(
        path,
        now=args.now,
        horizon_days=args.horizon_days,
        quiet_seconds=args.quiet_seconds,
        grace_seconds=args.grace_seconds,
        dry_run=args.dry_run,
        progress=args.progress,
        store=_view_store(),  # the next `prompt` or `show` resumes from it (issue 20)
        **_hub_side(path, args.config),
    ).local
    if args.json:
        print(json_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False)))
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
