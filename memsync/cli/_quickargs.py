"""The everyday commands' arguments, declared once, parsed without argparse when plain.

`add`, `forget`, `prompt` and `recall` run at every session start and on every tool call
of an agent without MCP. Importing argparse and building a parser is about 4 ms of their
start-up (issue 20: at most 3x the interpreter's own). Their arguments are declared here
(`SPECS`) and nowhere else: `register` gives argparse these declarations (for `--help`,
and for every command line `quick_args` declines), and `quick_args` parses the plain
command lines itself:

- the command first, then its positionals in one run, and its options by their full
  names (`--kind fact` or `--kind=fact`), each at most as often as argparse takes it;
- anything else returns None, and argparse parses the line (and reports its error) as
  before: an option before the command, an abbreviation, `-h`, `--`, a separate value
  that starts with "-", a missing, extra or split positional, a missing required option,
  a value its type or choices refuse.

So a command line means the same either way; `tests/cli/test_quickargs.py` compares the
two namespaces on generated command lines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from memsync.cli._common import (
    SCOPE_HELP,
    Handler,
    confidence_arg,
    positive_int_arg,
    timestamp_arg,
)
from memsync.core.records import KINDS

if TYPE_CHECKING:
    import argparse

__all__ = ["SPECS", "Arg", "Command", "lazy_handler", "quick_args", "register"]


class Arg:
    """One argument as `add_argument` takes it: a positional (`name` without "-") or a
    long option. Only what is given is passed on, so argparse's own defaults apply."""

    __slots__ = ("dest", "kwargs", "name")

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self.dest: str = kwargs.get("dest") or name.lstrip("-").replace("-", "_")
        self.kwargs = kwargs

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")


class Command:
    """A command: its name, its one-line help, its arguments, and its handler (a
    function of `memsync.cli.<module>`, imported when the command runs)."""

    __slots__ = ("args", "handler", "help", "name")

    def __init__(self, name: str, help: str, args: list[Arg], handler: tuple[str, str]) -> None:
        self.name, self.help, self.args, self.handler = name, help, args, handler


def lazy_handler(module: str, name: str) -> Handler:
    """The handler `name` of `memsync.cli.<module>`, imported only when its command runs:
    `memsync add` never imports what `show` or `sync` needs (issue 20: start-up time)."""

    def run(args: argparse.Namespace) -> int:
        handler: Handler = getattr(importlib.import_module(f"memsync.cli.{module}"), name)
        return handler(args)

    run.__qualname__ = f"{module}.{name}"  # what the test compares
    return run


SPECS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "add",
            "append a new entry; prints its id",
            [
                Arg("file", type=Path),
                Arg("--kind", required=True, choices=KINDS),
                Arg("--text", required=True),
                Arg("--scope", default="global"),
                Arg("--tag", action="append", default=[], help="repeat for several tags"),
                Arg("--source", default=None, help='where it was learned; "user" if the person'),
                Arg("--confidence", type=confidence_arg, default=1.0),
                Arg("--expires-at", type=timestamp_arg, default=None, metavar="TS"),
                Arg("--supersedes", default=None, metavar="ID"),
            ],
            ("_writes", "cmd_add"),
        ),
        Command(
            "forget",
            "append a tombstone for an id",
            [Arg("file", type=Path), Arg("id")],
            ("_writes", "cmd_forget"),
        ),
        Command(
            "prompt",
            "the memory block for an agent's context",
            [
                Arg(
                    "files",
                    type=Path,
                    nargs="*",
                    metavar="FILE",
                    help="left out: --memory NAME of the config (default: its only memory, "
                    "or 'me')",
                ),
                Arg("--memory", default=None, metavar="NAME", help="a memory of the config"),
                Arg("--config", type=Path, default=None, metavar="PATH"),
                Arg("--scope", default=None, help=SCOPE_HELP),
                Arg("--max-chars", type=positive_int_arg, default=None, metavar="N"),
                Arg("--now", type=timestamp_arg, default=None, metavar="TS"),
            ],
            ("_prompt", "cmd_prompt"),
        ),
        Command(
            "recall",
            "live entries matching words, best first",
            [
                Arg("file", type=Path, metavar="FILE"),
                Arg("query", metavar="QUERY"),
                Arg("--scope", default=None, help="the task's scope (global entries match too)"),
                Arg("--kind", action="append", choices=KINDS, default=[]),
                Arg("--min-confidence", type=confidence_arg, default=0.0, metavar="F"),
                Arg("--limit", type=positive_int_arg, default=10, metavar="N"),
                Arg("--json", action="store_true"),
            ],
            ("_agents", "cmd_recall"),
        ),
    )
}
"""The commands `quick_args` parses, as `memsync --help` lists them."""


def register(sub: Any, name: str) -> None:
    """Add command `name` of `SPECS` to the `memsync` subparsers `sub`."""
    command = SPECS[name]
    p = sub.add_parser(command.name, help=command.help)
    for arg in command.args:
        p.add_argument(arg.name, **arg.kwargs)
    p.set_defaults(handler=lazy_handler(*command.handler))


def quick_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """The namespace argparse would give for `argv` (the words after `memsync`), when it
    is a plain command line of a command in `SPECS`; None for argparse to parse. (A
    `SimpleNamespace` with the same attributes: argparse's own would import argparse.)"""
    if not argv or argv[0] not in SPECS:
        return None
    command = SPECS[argv[0]]
    options = {a.name: a for a in command.args if not a.positional}
    values: dict[str, Any] = {}
    given: set[str] = set()
    words: list[str] = []
    run_ended = False  # positionals come in one run: argparse splits some others
    i = 1
    while i < len(argv):
        word = argv[i]
        i += 1
        if not word.startswith("-"):
            if run_ended:
                return None
            words.append(word)
            continue
        if words:
            run_ended = True
        name, eq, text = word.partition("=")
        arg = options.get(name)
        if arg is None:
            return None
        action = arg.kwargs.get("action", "store")
        if action == "store_true":
            if eq:
                return None
            values[arg.dest] = True
        else:
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    return None
                text = argv[i]
                i += 1
            value = _converted(arg, text)
            if value is _REFUSED:
                return None
            if action == "append":
                values.setdefault(arg.dest, []).append(value)
            else:
                values[arg.dest] = value
        given.add(arg.name)
    placed = _positionals(command, words)
    if placed is None:
        return None
    if any(a.kwargs.get("required") and a.name not in given for a in options.values()):
        return None
    ns = SimpleNamespace(verbose=0, quiet=False, command=command.name)
    for arg in options.values():
        if arg.dest in values:
            setattr(ns, arg.dest, values[arg.dest])
            continue
        store_true = arg.kwargs.get("action") == "store_true"
        default = arg.kwargs.get("default", False if store_true else None)
        setattr(ns, arg.dest, list(default) if isinstance(default, list) else default)
    for dest, value in placed.items():
        setattr(ns, dest, value)
    ns.handler = lazy_handler(*command.handler)
    return cast("argparse.Namespace", ns)


_REFUSED = object()


def _converted(arg: Arg, text: str) -> Any:
    """`text` through the argument's type and choices, or `_REFUSED` (argparse then
    says why)."""
    convert: Callable[[str], Any] | None = arg.kwargs.get("type")
    if convert is not None:
        try:
            value: Any = convert(text)
        except Exception:  # noqa: BLE001 - ArgumentTypeError, ValueError...: argparse says it
            return _REFUSED
    else:
        value = text
    choices = arg.kwargs.get("choices")
    if choices is not None and value not in choices:
        return _REFUSED
    return value


def _positionals(command: Command, words: list[str]) -> dict[str, Any] | None:
    """The positionals' values from `words`, or None when they do not fit exactly."""
    positionals = [a for a in command.args if a.positional]
    placed: dict[str, Any] = {}
    rest = list(words)
    for arg in positionals:
        nargs = arg.kwargs.get("nargs")
        if nargs == "*":
            taken, rest = rest, []
            values = [_converted(arg, w) for w in taken]
            if any(v is _REFUSED for v in values):
                return None
            placed[arg.dest] = values
            continue
        if nargs is not None or not rest:
            return None
        value = _converted(arg, rest.pop(0))
        if value is _REFUSED:
            return None
        placed[arg.dest] = value
    return None if rest else placed
