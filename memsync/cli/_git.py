"""The git commands of the CLI (issue 22, item 6): `git setup` and `merge-driver`.

Registered into `memsync.cli`'s parser through its `_EXTRA_COMMANDS` hook. `merge-driver`
is what git runs (`merge.memsync.driver`); a refused merge is one `memsync: ...` line and
exit 2, which git reports as a conflict with OURS left as it was.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memsync.errors import MemsyncError

__all__ = ["cmd_git_setup", "cmd_merge_driver", "register"]


def _configured_patterns(root: Path, config: Path | None) -> list[str]:
    """Anchored `.gitattributes` patterns for the configured memories inside `root`."""
    from memsync.config import default_config_path, load_config

    path = config if config is not None else default_config_path()
    if config is None and not path.exists():
        return []
    top = root.resolve()
    out = []
    for mem in load_config(path).memory:
        try:
            rel = mem.path.resolve().relative_to(top)
        except ValueError:
            continue  # a memory outside this repository
        out.append("/" + rel.as_posix())
    return out


def cmd_git_setup(args: argparse.Namespace) -> int:
    from memsync.local.gitrepo import DEFAULT_PATTERNS, git_setup, repository_root

    root = repository_root(Path.cwd() if args.repo is None else args.repo)
    patterns = list(args.patterns) or _configured_patterns(root, args.config)
    if not patterns:
        patterns = list(DEFAULT_PATTERNS)
    done = git_setup(root, patterns)
    for pattern in done.added:
        print(f"{done.attributes}: added {pattern} merge=memsync")
    if not done.added:
        print(f"{done.attributes}: already lists {', '.join(patterns)}")
    print(f"{root}: git config merge.memsync.driver = {done.command}")
    if done.added:
        print("commit .gitattributes; run `memsync git setup` once in every clone")
    return 0


def cmd_merge_driver(args: argparse.Namespace) -> int:
    from memsync.local.gitrepo import run_merge_driver

    name = args.path if args.path is not None else str(args.ours)
    try:
        result = run_merge_driver(args.base, args.ours, args.theirs, name)
    except MemsyncError as exc:
        raise MemsyncError(f"merge-driver: {exc}; left as a conflict") from None
    for ours, _theirs in result.twins:
        print(
            f"memsync: {name}: twins for id {ours.id!r} (one key, two contents): both kept",
            file=sys.stderr,
        )
    return 0


def register(sub: Any) -> None:
    """Add `git setup` and `merge-driver` to the `memsync` subparsers `sub`."""
    p = sub.add_parser("git", help="memory files in a git repository")
    git_sub = p.add_subparsers(
        dest="git_command", metavar="ACTION", parser_class=type(p), help="setup"
    )
    git_sub.required = True
    s = git_sub.add_parser(
        "setup", help="make git merge memory files by memsync's rules (a merge driver)"
    )
    s.add_argument(
        "patterns",
        nargs="*",
        metavar="PATTERN",
        help="files to merge with memsync (default: the configured memories in this "
        "repository, else *.jsonl)",
    )
    s.add_argument("--repo", type=Path, default=None, metavar="DIR", help="default: here")
    s.add_argument("--config", type=Path, default=None, metavar="PATH")
    s.set_defaults(handler=cmd_git_setup)

    p = sub.add_parser("merge-driver", help="git's merge driver (run by git, not by hand)")
    p.add_argument("base", type=Path, metavar="BASE", help="%%O")
    p.add_argument("ours", type=Path, metavar="OURS", help="%%A: the merge is written here")
    p.add_argument("theirs", type=Path, metavar="THEIRS", help="%%B")
    p.add_argument("path", nargs="?", default=None, metavar="PATH", help="%%P (for messages)")
    p.set_defaults(handler=cmd_merge_driver)
