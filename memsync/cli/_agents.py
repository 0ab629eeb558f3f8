"""The agents' commands of the CLI: `mcp`, `recall`, `export`, `import`.

Registered into `memsync.cli`'s parser through its `_EXTRA_COMMANDS` hook. The MCP SDK is
imported only inside `cmd_mcp`, so `memsync --help` and every other command start without
it. Errors are raised as `MemsyncError`/`OSError` and printed by `cli.main` as one
`memsync: ...` line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.cli import _quickargs
from memsync.cli._common import configured_memory, refused
from memsync.core.render import fold, json_text, token
from memsync.errors import MemsyncError, UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["IMPORT_FORMATS", "cmd_export", "cmd_import", "cmd_mcp", "cmd_recall", "register"]

IMPORT_FORMATS = ("mcp-memory", "claude-auto-memory", "gemini-md", "agents-md")
"""`import --from`: the last three are `memsync.core.vendor_memory.FORMATS` (not imported
here, so that `memsync --help` stays light)."""


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise refused(f"not a port number: {text!r}") from None
    if not 0 < value < 65536:
        raise refused(f"a port is from 1 to 65535, not {text}")
    return value


def _memory_path(args: argparse.Namespace) -> tuple[Path, str]:
    """The file `memsync mcp` serves and its name: FILE, or `--memory NAME` from the config
    (the config's only memory when neither is given; "me" without a config)."""
    if args.file is not None and args.memory is not None:
        raise MemsyncError("mcp: give FILE or --memory NAME, not both")
    if args.file is not None:
        return Path(args.file).expanduser(), Path(args.file).stem
    return configured_memory(args.memory, args.config, "mcp")


def cmd_mcp(args: argparse.Namespace) -> int:
    path, name = _memory_path(args)
    if path.is_dir():  # a missing FILE is fine (the first `remember` creates it), a folder not
        raise UsageError(f"{path}: is a folder, not a memory file")
    if args.http:
        from memsync.mcp_server import check_host

        check_host(args.host, args.allow_remote)  # before the SDK's import time is paid
    try:
        from memsync import mcp_server

        if args.http:
            from memsync.cli._mcp_http import serve_http
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] in {"mcp", "mcp_types", "uvicorn"}:
            raise MemsyncError(
                "mcp: the MCP server needs the mcp extra: pip install 'memsync[mcp]'"
            ) from None
        raise
    from memsync.cli._keys import config_or_default
    from memsync.config.wiring import own_key_forms
    from memsync.local.logs import get_logger

    get_logger("memsync")  # the CLI's set-up in place: the server logs through `logging`

    # Issue 24, item 5: `remember` refuses this machine's hub keys in every printed form.
    refused = own_key_forms(config_or_default(args.config))
    if args.http:
        serve_http(
            lambda: mcp_server.start(path, name, refused=refused),
            args.host,
            args.port,
            args.allow_host,
        )
    else:
        mcp_server.serve(path, name, refused=refused)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from memsync.local.fulltext import recall

    hits = recall(
        args.file,
        args.query,
        scope=args.scope,
        kinds=args.kind,
        min_confidence=args.min_confidence,
        limit=args.limit,
        persistent=True,  # one recall: the persistent view, not a cache (issue 20)
    )
    if args.json:
        import json  # only here: a plain `recall` starts without it (issue 20)

        print(json_text(json.dumps([h.to_json() for h in hits], indent=2, ensure_ascii=False)))
    else:
        # One line per hit (SEMANTICS rule 17): the id and scope quoted when they hold a
        # space or a delimiter, the text folded; "user" after the scope is memsync's mark.
        for h in hits:
            who = " user" if h.source == "user" else ""
            print(f"{token(h.id)}  {h.kind:<10} {token(h.scope)}{who}  {fold(h.text)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from memsync.local.export import export_markdown, write_markdown

    if args.out is None or str(args.out) == "-":
        sys.stdout.write(export_markdown(args.file))
    else:
        write_markdown(args.file, args.out)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from memsync.local.importers import import_mcp_memory, import_vendor

    if args.fmt == "mcp-memory":
        if args.scope is not None:
            raise UsageError(
                "import: --scope is for Markdown formats (mcp-memory scopes by entity)"
            )
        result = import_mcp_memory(args.src, args.into, dry_run=args.dry_run)
    else:
        scope = "global" if args.scope is None else args.scope
        result = import_vendor(args.fmt, args.src, args.into, scope=scope, dry_run=args.dry_run)
    if args.json:
        import json

        doc: dict[str, Any] = result.to_json()
        print(json.dumps(doc, indent=2))
    else:
        verb = "would append" if args.dry_run else "appended"
        print(
            f"{args.into}: {verb} {result.appended} entr{'y' if result.appended == 1 else 'ies'}"
            f"; {result.present} already there"
            + (
                f"; {result.forgotten} forgotten since an earlier import (not imported again)"
                if result.forgotten
                else ""
            )
        )
        for line in result.skipped:
            print(f"skipped: {line}")
    return 0


def register(sub: Any) -> None:
    """Add `mcp`, `recall`, `export` and `import` to the `memsync` subparsers `sub`."""
    p = sub.add_parser("mcp", help="serve a memory to agents over MCP (stdio, or --http)")
    p.add_argument("file", type=Path, nargs="?", default=None, metavar="FILE")
    p.add_argument("--memory", default=None, metavar="NAME", help="a memory of the config")
    p.add_argument("--config", type=Path, default=None, metavar="PATH")
    p.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="with --http (default 8765)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="with --http: allow a non-loopback --host (no authentication!)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --http: also answer requests for Host NAME[:PORT] (a proxy's name, "
        "or the name clients use with --allow-remote); repeatable",
    )
    p.set_defaults(handler=cmd_mcp)

    _quickargs.register(sub, "recall")

    p = sub.add_parser("export", help="a readable summary of a memory (Markdown)")
    p.add_argument("--markdown", action="store_true", required=True, help="the format")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("out", type=Path, nargs="?", default=None, metavar="OUT", help="default: -")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("import", help="append another tool's memories (idempotent)")
    p.add_argument("--from", dest="fmt", required=True, choices=IMPORT_FORMATS)
    p.add_argument(
        "src",
        type=Path,
        metavar="SRC",
        help="the reference server's memory.jsonl; Claude Code's memory folder "
        "(~/.claude/projects/<project>/memory); a GEMINI.md; an AGENTS.md",
    )
    p.add_argument("into", type=Path, metavar="INTO")
    p.add_argument(
        "--scope",
        default=None,
        help="the scope of entries imported from Markdown (default global), e.g. project:NAME",
    )
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_import)
