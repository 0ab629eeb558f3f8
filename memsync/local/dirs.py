"""Where memsync keeps things on this machine by default (the XDG base directories).

Lower than the config: the library (a recall index, a merge index) needs the state
directory's default without reading a config file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_state_dir", "xdg_dir"]


def xdg_dir(env: Mapping[str, str], var: str, fallback: str) -> Path:
    """`$var` when it is an absolute path, else `fallback` with `~` expanded."""
    # The XDG base directory spec says to ignore a relative value.
    value = env.get(var, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path(os.path.expanduser(fallback))


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return `$XDG_STATE_HOME/memsync`, else `~/.local/state/memsync`."""
    env = os.environ if env is None else env
    return xdg_dir(env, "XDG_STATE_HOME", "~/.local/state") / "memsync"
