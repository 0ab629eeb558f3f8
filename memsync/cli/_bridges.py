"""`memsync bridge add | list | remove | sync` (issue 22): files agents read, kept in step
with a memory, for people who would rather not edit the config's TOML.

`add` appends a `[[bridge]]` table to the config (checked by loading the result before it
replaces the file) and syncs it once; `remove` takes the table out and memsync's block
out of the file, which is left as it was without it; `sync` syncs every bridge (or those
of one memory) once, as the daemon does on every change; `list` shows them.
Registered into `memsync.cli`'s parser through its `_EXTRA_COMMANDS` hook.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.cli._common import EXIT_FOUND, EXIT_OK, confidence_arg
from memsync.core.records import KINDS
from memsync.errors import ConfigError, UsageError, shown

if TYPE_CHECKING:
    from memsync.config import Config
    from memsync.config.bridges import BridgeConfig
    from memsync.local.bridges import BridgeResult

__all__ = [
    "cmd_bridge_add",
    "cmd_bridge_list",
    "cmd_bridge_remove",
    "cmd_bridge_sync",
    "register",
    "sync_one",
]

_FORMATS = ("agents-md", "claude-md", "gemini-md", "markdown", "claude-auto-memory")
_HEADER = re.compile(r"^\s*\[\[\s*bridge\s*\]\]\s*(#.*)?$")
_ANY_TABLE = re.compile(r"^\s*\[")


def _config_path(arg: Path | None) -> Path:
    from memsync.config import default_config_path

    return arg if arg is not None else default_config_path()


def _load(path: Path) -> Config:
    from memsync.config import default_config, load_config

    return load_config(path) if path.exists() else default_config()


def _machine(config: Config) -> str:
    from memsync.hub.state import resolve_replica
    from memsync.local.statedir import StateDir

    return resolve_replica(config.replica, StateDir(config.state_dir))


def sync_one(config: Config, bridge: BridgeConfig, machine: str) -> BridgeResult:
    """Sync one configured bridge with its memory."""
    from memsync.config.bridges import sync_configured
    from memsync.local.bridges import BridgeResult

    memory = config.memory_named(bridge.memory)
    assert memory is not None  # the config checked it
    try:
        return sync_configured(bridge, memory.path, machine=machine, state_dir=config.state_dir)
    except OSError as exc:  # this bridge's file (a symlink loop, no permission): the others go on
        return BridgeResult(str(bridge.path), refused=str(exc))


def _print(result: BridgeResult) -> None:
    if result.refused is not None:
        print(f"{result.path}: REFUSED: {result.refused}")
        return
    did = "written" if result.written else "up to date"
    print(f"{result.path}: {did}; {result.appended} record(s) from edits in the block")
    for note in result.notes:
        print(f"  {note}")


def cmd_bridge_sync(args: argparse.Namespace) -> int:
    config = _load(_config_path(args.config))
    if args.memory is not None and config.memory_named(args.memory) is None:
        raise UsageError(f"no memory named {shown(args.memory)} in the config")
    machine = _machine(config)
    results = [
        sync_one(config, b, machine)
        for b in config.bridge
        if args.memory is None or b.memory == args.memory
    ]
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        if not results:
            print("no bridge is configured ([[bridge]] in the config, or `memsync bridge add`)")
        for r in results:
            _print(r)
    return EXIT_FOUND if any(r.refused for r in results) else EXIT_OK


def cmd_bridge_list(args: argparse.Namespace) -> int:
    from memsync.core.bridge_block import BlockError, locate

    config = _load(_config_path(args.config))
    rows: list[dict[str, Any]] = []
    for b in config.bridge:
        state = "no file"
        if b.path.is_file():
            try:
                text = b.path.read_text(encoding="utf-8")
                state = "block" if locate(text) is not None else "no block yet"
            except (UnicodeDecodeError, BlockError) as exc:
                state = f"damaged: {exc}"
        elif b.path.is_dir():
            state = "folder"
        rows.append({"memory": b.memory, "format": b.format, "path": str(b.path), "state": state})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        if not rows:
            print("no bridge is configured")
        for r in rows:
            print(f"{r['memory']}  {r['format']:<18}  {r['path']}  ({r['state']})")
    return EXIT_OK


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string, as JSON writes it


def _table(args: argparse.Namespace, path: Path) -> str:
    lines = [
        "[[bridge]]",
        f"memory = {_toml_string(args.memory)}",
        f"path = {_toml_string(str(path))}",
        f"format = {_toml_string(args.format)}",
    ]
    if args.scope is not None:
        lines.append(f"scope = {_toml_string(args.scope)}")
    if args.kind:
        lines.append(f"kinds = [{', '.join(_toml_string(k) for k in args.kind)}]")
    if args.min_confidence is not None:
        lines.append(f"min_confidence = {args.min_confidence!r}")
    if args.budget is not None:
        budget = args.budget
        lines.append(f"budget = {budget if budget.isdigit() else _toml_string(budget)}")
    return "\n".join(lines) + "\n"


def _replace_config(path: Path, text: str) -> Config:
    """Replace the config file with `text` once it loads (nothing changes otherwise)."""
    from memsync.config import load_config
    from memsync.local.storage import atomic_replace

    trial = path.with_name(f".{path.name}.memsync-check-{os.getpid()}")
    try:
        trial.write_text(text, encoding="utf-8")
        try:
            config = load_config(trial)
        except ConfigError as exc:
            raise ConfigError(str(path), exc.key, exc.message) from None
    finally:
        trial.unlink(missing_ok=True)
    atomic_replace(path, text.encode("utf-8"))
    return config


def cmd_bridge_add(args: argparse.Namespace) -> int:
    config_path = _config_path(args.config)
    path = Path(os.path.abspath(os.path.expanduser(args.path)))
    old = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    if args.memory is None:
        names = [m.name for m in _load(config_path).memory]
        if len(names) != 1:
            raise UsageError(
                f"bridge add: name the memory with --memory (one of {', '.join(names)})"
            )
        args.memory = names[0]
    if args.format != "claude-auto-memory" and not os.path.lexists(path):
        from memsync.local.bridge_files import may_create

        if (why := may_create(path)) is not None:
            raise UsageError(f"bridge add: {why}")
    sep = "" if not old else ("\n" if old.endswith("\n") else "\n\n")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config = _replace_config(config_path, old + sep + _table(args, path))
    print(f"{config_path}: added a [[bridge]] of {path} ({args.format})")
    bridge = next(b for b in config.bridge if b.path == path)
    result = sync_one(config, bridge, _machine(config))
    _print(result)
    return EXIT_FOUND if result.refused else EXIT_OK


def _tables(text: str) -> list[tuple[int, int]]:
    """The line ranges [start, stop) of each `[[bridge]]` table of a config's text."""
    lines = text.splitlines(keepends=True)
    out = []
    i = 0
    while i < len(lines):
        if _HEADER.match(lines[i]):
            j = i + 1
            while j < len(lines) and not _ANY_TABLE.match(lines[j]):
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return out


def cmd_bridge_remove(args: argparse.Namespace) -> int:
    from memsync.local.bridges import remove_block

    config_path = _config_path(args.config)
    config = _load(config_path)
    target = Path(os.path.realpath(os.path.expanduser(args.path)))
    matches = [b for b in config.bridge if Path(os.path.realpath(b.path)) == target]
    if not matches:
        raise UsageError(f"bridge remove: no [[bridge]] of {args.path} in {config_path}")
    text = config_path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    for start, stop in _tables(text):
        table = tomllib.loads("".join(lines[start:stop]))["bridge"][0]
        if Path(os.path.realpath(os.path.expanduser(str(table.get("path", ""))))) == target:
            while start > 0 and not lines[start - 1].strip():
                start -= 1  # the blank line `add` put before it
            rest = "".join(lines[:start] + lines[stop:])
            _replace_config(config_path, rest)
            break
    else:
        raise UsageError(f"bridge remove: cannot find the [[bridge]] of {args.path} in the text")
    print(f"{config_path}: removed the [[bridge]] of {matches[0].path}")
    if matches[0].format == "claude-auto-memory":
        from memsync.local.claude_bridge import remove_claude_bridge

        gone = remove_claude_bridge(matches[0].path, state_dir=config.state_dir)
        print(
            f"{matches[0].path}: {gone} memory file(s) of memsync's and its index block taken out"
        )
        return EXIT_OK
    if remove_block(matches[0].path, state_dir=config.state_dir):
        print(f"{matches[0].path}: memsync's block taken out; the rest is as it was")
    else:
        print(f"{matches[0].path}: held no block of memsync's")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add `bridge add | list | remove | sync` to the `memsync` subparsers `sub`."""
    p = sub.add_parser("bridge", help="keep AGENTS.md, CLAUDE.md, GEMINI.md ... in step")
    bsub = p.add_subparsers(
        dest="bridge_command", metavar="ACTION", parser_class=type(p), help="add list remove sync"
    )
    bsub.required = True

    s = bsub.add_parser("add", help="bridge a file to a memory (a [[bridge]] in the config)")
    s.add_argument("path", metavar="PATH", help="the file (claude-auto-memory: the project)")
    s.add_argument("--format", required=True, choices=_FORMATS, help="how the file is written")
    s.add_argument("--memory", default=None, metavar="NAME", help="default: the only memory")
    s.add_argument("--scope", default=None, help="the task's scope (default: global only)")
    s.add_argument("--kind", action="append", choices=KINDS, default=[], help="repeat")
    s.add_argument("--min-confidence", type=confidence_arg, default=None, metavar="F")
    s.add_argument("--budget", default=None, help="characters, or '150 lines', '8000 bytes'")
    s.add_argument("--config", type=Path, default=None, metavar="PATH")
    s.set_defaults(handler=cmd_bridge_add)

    s = bsub.add_parser("list", help="the configured bridges")
    s.add_argument("--config", type=Path, default=None, metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_bridge_list)

    s = bsub.add_parser("remove", help="stop bridging a file and take memsync's block out")
    s.add_argument("path", metavar="PATH", help="the bridged file (as given to bridge add)")
    s.add_argument("--config", type=Path, default=None, metavar="PATH")
    s.set_defaults(handler=cmd_bridge_remove)

    s = bsub.add_parser("sync", help="sync every bridge once (the daemon does it on change)")
    s.add_argument("--memory", default=None, metavar="NAME")
    s.add_argument("--config", type=Path, default=None, metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_bridge_sync)
