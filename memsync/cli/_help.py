"""The words `--help` says for each subcommand and option (issue 13, item 22).

Options share one text wherever they mean the same (`--now`, `--json`, `--config`, a
memory `FILE`); where the same name means something else in one command, that command's
own text wins. `describe` fills in whatever the parsers left without help, and makes each
subcommand's one-line help its description too; a test checks that nothing is left bare.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["describe"]

_TS = "an RFC 3339 instant with a zone, e.g. 2026-12-01T09:30:00Z or 2026-12-01T10:30:00+01:00"

_COMMON = {
    "file": "the memory file (agent-memory/0.1 JSON Lines)",
    "files": "memory files, read together as one memory",
    "now": f"evaluate as of this instant instead of the clock ({_TS})",
    "json": "print one JSON document instead of text",
    "config": "the config file (default: $MEMSYNC_CONFIG, else "
    "$XDG_CONFIG_HOME/memsync/config.toml or ~/.config/memsync/config.toml)",
    "kind": "only entries of this kind; repeat for several",
    "min_confidence": "only entries at least this confident (0 to 1)",
    "dry_run": "say what would be done; change nothing",
}

_OWN = {
    ("add", "kind"): "what sort of memory it is",
    ("add", "text"): "the memory itself, one sentence a model can read as it is",
    ("add", "scope"): "where it applies: global (default), a domain such as github.com "
    "(its subdomains too), or project:NAME",
    ("add", "confidence"): "how sure the agent is, 0 to 1 (default 1)",
    ("add", "expires_at"): f"when it stops applying ({_TS})",
    ("add", "supersedes"): "the id this entry replaces for good (SEMANTICS rule 10)",
    ("prompt", "max_chars"): "at most this many characters: the least confident entries "
    "are left out first, and a last line says how many",
    ("forget", "id"): "the id of the entry to delete (a tombstone is appended)",
    ("merge", "sources"): "the files whose records DEST lacks",
    ("merge", "into"): "the file to append to (created when missing)",
    ("handoff", "src"): "the memory to hand over",
    ("handoff", "dest"): "the receiving agent's memory file (created when missing)",
    ("handoff", "since"): f"only records created at or after this instant ({_TS})",
    ("sync", "memory"): "only this memory of the config (default: all)",
    ("sync", "remote"): "only this remote of the config (default: all)",
    ("forget-replica", "replica"): "the replica id, as `memsync status` lists it",
    ("mcp", "file"): "the memory file to serve (or --memory NAME from the config)",
    ("mcp", "config"): _COMMON["config"],
    ("recall", "query"): "the words to look for (stemmed: 'retries' finds 'retry')",
    ("recall", "limit"): "at most this many entries (default 10)",
    ("export", "file"): _COMMON["file"],
    ("import", "fmt"): "the other tool's format",
    ("import", "into"): "the memory file to append to",
    ("key", "key_command"): "new, show, import or rotate",
}


def describe(sub: argparse._SubParsersAction[Any]) -> None:
    """Fill in the description of every subcommand and the help of every option that has
    none, from the tables above (recursing into nested subcommands such as `key`)."""
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, parser in sub.choices.items():
        if not parser.description:
            parser.description = helps.get(name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                describe(action)
            if action.help is None:
                action.help = _OWN.get((name, action.dest), _COMMON.get(action.dest))
