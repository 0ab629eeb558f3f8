"""The `memsync` command line: parse argv, call the library, map errors to exit codes once.

Exit codes: 0 success; 1 something was found or failed (`check` findings, a failed remote);
2 a usage, input or I/O error; 3 compaction did not start (the file is busy; retry later).
Every error is one line on stderr, `memsync: <what went wrong>`, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from memsync import __version__
from memsync.cli import _quickargs
from memsync.cli._common import (
    EXIT_ERROR,
    EXIT_NOT_QUIET,
    SCOPE_HELP,
    Handler,
    at_most,
    confidence_arg,
    timestamp_arg,
)
from memsync.cli._quickargs import lazy_handler as _lazy
from memsync.cli._quickargs import quick_args
from memsync.cli._statedir import configured_state_dir_set
from memsync.core.records import KINDS
from memsync.errors import MemsyncError, NotQuiet
from memsync.local import logs
from memsync.local.platforms import refuse_native_windows
from memsync.local.progress import progress_line

if TYPE_CHECKING:
    import argparse

    from memsync.cli._parser import Parser

    _Subparsers: TypeAlias = argparse._SubParsersAction[Parser]

__all__ = ["main"]


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or with `argv` given and naming a
    command, that command's alone (issue 20: `memsync add` builds one subcommand's parser
    and imports no other command's module; what it accepts and prints is the same)."""
    from memsync.cli._help import describe
    from memsync.cli._parser import Parser

    Parser.building = True  # no terminal measured for each argument (`Parser.building`)
    try:
        parser = Parser(
            prog="memsync",
            description="Keep agent memory files consistent across machines and agents.",
        )
        parser.add_argument("--version", action="version", version=f"memsync {__version__}")
        parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
        parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
        sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
        sub.required = True
        command = None if argv is None else _command_of(argv)
        if command in _COMMANDS:
            _COMMANDS[command](sub)
        elif command in _EXTRA_COMMANDS:
            _register_extra(_EXTRA_COMMANDS[command], sub)
        else:  # --help, no command, or a misspelt one: argparse lists every command
            for register in _COMMANDS.values():
                register(sub)
            for module in dict.fromkeys(_EXTRA_COMMANDS.values()):
                _register_extra(module, sub)
        describe(sub)
    finally:
        Parser.building = False
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word that is not an option (the options before
    a command take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _register_extra(module: str, sub: _Subparsers) -> None:
    importlib.import_module(f"memsync.cli.{module}").register(sub)


def _show(sub: _Subparsers) -> None:
    p = sub.add_parser("show", help="the view of one or more files together")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--scope", default=None, help=SCOPE_HELP)
    p.add_argument("--kind", action="append", choices=KINDS, default=[])
    p.add_argument("--now", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument("--json", action="store_true", help="a JSON array of the live records")
    p.add_argument(
        "--digest",
        action="store_true",
        help="print the view's digest and entry count instead: equal on machines that agree",
    )
    p.set_defaults(handler=_lazy("_files", "cmd_show"))


def _check(sub: _Subparsers) -> None:
    p = sub.add_parser("check", help="bad lines, twins, secrets, future-dated records")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--now", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_lazy("_files", "cmd_check"))


def _merge(sub: _Subparsers) -> None:
    p = sub.add_parser("merge", help="append to DEST the records of SRC... that it lacks")
    p.add_argument("sources", type=Path, nargs="+", metavar="SRC")
    p.add_argument("--into", type=Path, required=True, metavar="DEST")
    p.add_argument("--now", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument("--dry-run", action="store_true", help="say what would be appended")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--no-index",
        action="store_true",
        help="a one-off merge: read everything, keep no index in the state directory",
    )
    _quiet_option(p)
    p.set_defaults(handler=_lazy("_files", "cmd_merge"))


def _handoff(sub: _Subparsers) -> None:
    p = sub.add_parser("handoff", help="hand a memory, or a slice of it, to another agent")
    p.add_argument("src", type=Path, metavar="SRC")
    p.add_argument("dest", type=Path, metavar="DEST")
    p.add_argument(
        "--within",
        dest="within",
        action="append",
        default=[],
        metavar="SCOPE",
        help="entries of this scope and, for a domain, of its subdomains (never global "
        "ones: unlike show's --scope); repeat for several",
    )
    # The old spelling, kept for scripts: it meant --within (not show's --scope).
    from argparse import SUPPRESS

    p.add_argument("--scope", dest="within", action="append", help=SUPPRESS)
    p.add_argument("--kind", action="append", choices=KINDS, default=[])
    p.add_argument("--min-confidence", type=confidence_arg, default=None, metavar="F")
    p.add_argument("--since", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument("--now", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument("--dry-run", action="store_true", help="list what would be appended")
    p.add_argument("--json", action="store_true")
    _quiet_option(p)
    p.set_defaults(handler=_lazy("_files", "cmd_handoff"))


def _compact(sub: _Subparsers) -> None:
    from memsync.core.compaction_limits import (  # a dataclass module: compact's alone
        DEFAULT_GRACE_SECONDS,
        DEFAULT_HORIZON_DAYS,
        DEFAULT_QUIET_SECONDS,
        MAX_HORIZON_DAYS,
        MAX_WAIT_SECONDS,
    )

    p = sub.add_parser("compact", help="rewrite a file with only what its view needs")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="when FILE is a configured memory, tombstones go only once every replica read them",
    )
    p.add_argument("--now", type=timestamp_arg, default=None, metavar="TS")
    p.add_argument(
        "--horizon-days",
        type=at_most(MAX_HORIZON_DAYS),
        default=DEFAULT_HORIZON_DAYS,
        metavar="N",
        help=f"tombstones older than this may go (default {DEFAULT_HORIZON_DAYS:g})",
    )
    p.add_argument(
        "--quiet-seconds",
        type=at_most(MAX_WAIT_SECONDS),
        default=DEFAULT_QUIET_SECONDS,
        metavar="N",
        help=f"start only if the file has not changed for this long (default {DEFAULT_QUIET_SECONDS:g})",
    )
    p.add_argument(
        "--grace-seconds",
        type=at_most(MAX_WAIT_SECONDS),
        default=DEFAULT_GRACE_SECONDS,
        metavar="N",
        help=f"how long at most to copy late writes to the old file (default {DEFAULT_GRACE_SECONDS:g})",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be dropped")
    p.add_argument("--json", action="store_true")
    _quiet_option(p)
    p.set_defaults(handler=_lazy("_files", "cmd_compact"))


def _sync(sub: _Subparsers) -> None:
    p = sub.add_parser("sync", help="one pass of pull, merge and push with the remotes")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument("--memory", default=None, metavar="NAME")
    p.add_argument("--remote", default=None, metavar="NAME")
    p.add_argument("--json", action="store_true")
    _quiet_option(p)
    p.set_defaults(handler=_lazy("_hubs", "cmd_sync"))


def _check_config(sub: _Subparsers) -> None:
    p = sub.add_parser("check-config", help="validate a config file and print it resolved")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=_lazy("_hubs", "cmd_check_config"))


def _daemon(sub: _Subparsers) -> None:
    p = sub.add_parser("daemon", help="run in the foreground, keeping memories in sync")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=_lazy("_hubs", "cmd_daemon"))


def _status(sub: _Subparsers) -> None:
    p = sub.add_parser("status", help="what the daemon is doing; exit 1 when something is wrong")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--cached",
        action="store_true",
        help="judge convergence on the receipts the last sync read; do not reach the hubs now",
    )
    p.set_defaults(handler=_lazy("_hubs", "cmd_status"))


def _diff(sub: _Subparsers) -> None:
    p = sub.add_parser(
        "diff", help="the entries that differ between this machine's view and another replica's"
    )
    p.add_argument(
        "replica", metavar="REPLICA", help="a replica id, as `memsync status` lists them"
    )
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument(
        "--memory",
        default=None,
        metavar="NAME",
        help="the memory to compare (default: the only one)",
    )
    p.add_argument(
        "--remote",
        default=None,
        metavar="NAME",
        help="the hub to compare through (default: the only one)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_lazy("_convergence", "cmd_diff"))


def _forget_replica(sub: _Subparsers) -> None:
    p = sub.add_parser("forget-replica", help="stop waiting for a retired replica")
    p.add_argument("replica", metavar="NAME")
    p.add_argument("--undo", action="store_true", help="take a replica back")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.set_defaults(handler=_lazy("_hubs", "cmd_forget_replica"))


_COMMANDS: dict[str, Callable[[_Subparsers], None]] = {
    "add": partial(_quickargs.register, name="add"),
    "forget": partial(_quickargs.register, name="forget"),
    "show": _show,
    "prompt": partial(_quickargs.register, name="prompt"),
    "check": _check,
    "merge": _merge,
    "handoff": _handoff,
    "compact": _compact,
    "sync": _sync,
    "check-config": _check_config,
    "daemon": _daemon,
    "status": _status,
    "diff": _diff,
    "forget-replica": _forget_replica,
}
"""The commands this module defines, in the order `--help` lists them."""

_EXTRA_COMMANDS = {
    "mcp": "_agents",
    "recall": "_agents",
    "export": "_agents",
    "import": "_agents",
    "key": "_keys",  # key new | show | import | rotate (issue 12)
    "git": "_git",  # git setup, merge-driver (issue 22)
    "merge-driver": "_git",
    "bridge": "_bridges",  # bridge add | list | remove | sync (issue 22)
}
"""The commands other modules of `memsync.cli` register (each module's `register`), by
name: only the module of the command run is imported."""


QUIET_HELP = "no progress line on a terminal for long operations"


def _quiet_option(p: argparse.ArgumentParser) -> None:
    """`--quiet` after the command too (`memsync merge ... --quiet`). SUPPRESS: a default
    here would overwrite a `memsync --quiet merge ...` given before the command."""
    import argparse

    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (see the module docstring)."""
    try:
        refuse_native_windows()  # one line pointing to WSL2 (issue 23)
        words = sys.argv[1:] if argv is None else list(argv)
        # A plain line of an everyday command is parsed without argparse (`_quickargs`).
        args = quick_args(words) or _build_parser(words).parse_args(words)
        logs.configure(args.verbose)  # applied when memsync first logs (issue 20)
        handler: Handler = args.handler
        # Issue 14: a progress line on a terminal, erased before any `memsync: ...` line.
        progress = progress_line(sys.stderr, quiet=args.quiet)
        args.progress = progress
        try:
            with configured_state_dir_set(getattr(args, "config", None)):  # the daemon's
                return handler(args)
        finally:
            logs.unconfigured()
            if progress is not None:
                progress.clear()
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
    if exc.filename is not None and isinstance(exc, IsADirectoryError):
        return f"{exc.filename}: is a folder, not a file"  # the word `existing` uses too
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror.lower()}"
    return str(exc)
