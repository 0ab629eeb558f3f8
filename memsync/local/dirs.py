"""Where memsync keeps things on this machine by default (the XDG base directories).

Lower than the config: the library (a recall index, a merge index) needs the state
directory's default without reading a config file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DEFAULT_MEMORY_NAME",
    "FORMER_DEFAULT_MEMORY_FILE",
    "STATE_DIR_VARIABLE",
    "default_config_path",
    "default_memory_path",
    "default_state_dir",
    "former_default_beside",
    "xdg_dir",
]

DEFAULT_MEMORY_NAME = "me"
"""The one default memory (issue 24, item 17): the embedded config's, the tour's, the
session-start hook's and `memsync mcp --memory me`'s."""
_AGENT_MEMORY = "~/.local/share/agent-memory"
FORMER_DEFAULT_MEMORY_FILE = "memory.jsonl"
"""The embedded default's file before the default became "me": a daemon that ran without a
config kept its memory there."""


def xdg_dir(env: Mapping[str, str], var: str, fallback: str) -> Path:
    """`$var` when it is an absolute path, else `fallback` with `~` expanded."""
    # The XDG base directory spec says to ignore a relative value.
    value = env.get(var, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path(os.path.expanduser(fallback))


STATE_DIR_VARIABLE = "MEMSYNC_STATE_DIR"
"""The environment variable naming the state directory: the command line sets it from the
config's `state_dir` (`memsync.cli._statedir`), so that every command, the daemon, the MCP
server and the processes they start keep one state directory."""


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return `$MEMSYNC_STATE_DIR` when it is an absolute path (`~` expanded), else
    `$XDG_STATE_HOME/memsync`, else `~/.local/state/memsync`."""
    env = os.environ if env is None else env
    named = os.path.expanduser(env.get(STATE_DIR_VARIABLE, ""))
    if named and os.path.isabs(named):
        return Path(named)
    return xdg_dir(env, "XDG_STATE_HOME", "~/.local/state") / "memsync"


def default_memory_path() -> Path:
    """Return the default memory's file: `~/.local/share/agent-memory/me.jsonl`.

    When only the former default file (`memory.jsonl` beside it) exists, that file instead:
    a machine whose daemon ran on the old embedded default keeps its memory where it is,
    nothing stranded (issue 24, item 17). `former_default_beside` says when both exist.
    """
    folder = Path(os.path.expanduser(_AGENT_MEMORY))
    path = folder / f"{DEFAULT_MEMORY_NAME}.jsonl"
    former = folder / FORMER_DEFAULT_MEMORY_FILE
    if not path.exists() and former.exists():
        return former
    return path


def former_default_beside(path: Path) -> Path | None:
    """The former default file when `path` is the default memory's file and the former one
    exists too (its entries are then not synced: the caller says so), else None."""
    former = Path(os.path.expanduser(_AGENT_MEMORY)) / FORMER_DEFAULT_MEMORY_FILE
    if path == former.with_name(f"{DEFAULT_MEMORY_NAME}.jsonl") and former.exists():
        return former
    return None


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """Return where the config file is looked for.

    `$MEMSYNC_CONFIG` if set, else `$XDG_CONFIG_HOME/memsync/config.toml`, else
    `~/.config/memsync/config.toml`. `env` defaults to `os.environ`.
    """
    env = os.environ if env is None else env
    explicit = env.get("MEMSYNC_CONFIG", "")
    if explicit:
        return Path(os.path.expanduser(explicit))
    return xdg_dir(env, "XDG_CONFIG_HOME", "~/.config") / "memsync" / "config.toml"
