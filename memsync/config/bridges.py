"""`[[bridge]]`: a file an agent reads and writes, kept in step with a memory (issue 22).

    [[bridge]]
    memory = "me"                  # a [[memory]] of this config
    path = "~/.codex/AGENTS.md"    # the bridged file (claude-auto-memory: the project)
    format = "agents-md"           # agents-md | claude-md | gemini-md | markdown
                                   # | claude-auto-memory
    scope = "project:web"          # the task's scope (left out: global entries only)
    kinds = ["preference", "avoid"]  # left out: every kind
    min_confidence = 0.5           # left out: 0
    budget = "150 lines"           # or 4000 (characters), "8000 bytes"; left out: none

`memsync.config.model.Config` checks the memory names and that paths are unique;
`BridgeConfig.bridge` makes the library's `memsync.local.bridges.Bridge`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from memsync.config._messages import KeyedValueError, describe
from memsync.core.bridge_block import Limits, Selection
from memsync.core.records import KINDS

if TYPE_CHECKING:
    from memsync.local.bridges import Bridge, BridgeResult

__all__ = ["BRIDGE_FORMATS", "BridgeConfig", "parse_budget", "sync_configured", "watched_files"]

BRIDGE_FORMATS = ("agents-md", "claude-md", "gemini-md", "markdown", "claude-auto-memory")

_BUDGET = re.compile(r"^\s*(\d{1,9})\s*(chars|characters|lines|bytes)?\s*$")
_MAX_BUDGET = 4 * 1024 * 1024


def parse_budget(value: object) -> Limits | None:
    """A budget: an integer (characters) or "<n> chars", "<n> lines", "<n> bytes".

    Raises:
        ValueError: anything else, or a number out of 1 to 4 MiB.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(  # noqa: TRY004 (pydantic reports only ValueError)
            f"expected a number or a string like '150 lines', got {describe(value)}"
        )
    m = _BUDGET.match(str(value))
    if m is None:
        raise ValueError(
            f"budget {value!r}: write a number of characters, or '<n> lines', '<n> bytes'"
        )
    n, unit = int(m[1]), m[2] or "chars"
    if not 1 <= n <= _MAX_BUDGET:
        raise ValueError(f"budget {value!r}: from 1 to {_MAX_BUDGET}")
    if unit == "lines":
        return Limits(max_lines=n)
    if unit == "bytes":
        return Limits(max_bytes=n)
    return Limits(max_chars=n)


def _expand(value: object) -> Path:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a path string, got {describe(value)}")
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        raise ValueError(f"{value!r} is not an absolute path; write /... or ~/...")
    return path


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


class BridgeConfig(BaseModel):
    """One `[[bridge]]` (the module docstring)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )

    memory: str
    """The name of the `[[memory]]` bridged."""
    path: Annotated[Path, BeforeValidator(_expand)]
    """The bridged file; for `claude-auto-memory`, the project's folder (its git root)."""
    format: Literal["agents-md", "claude-md", "gemini-md", "markdown", "claude-auto-memory"]
    """How the file is written and read."""
    scope: str | None = None
    """The task's scope: entries of it (and of the domains it is a subdomain of) and
    global ones; left out, global ones only."""
    kinds: Annotated[tuple[str, ...], BeforeValidator(_as_tuple)] = KINDS
    """The kinds of entry bridged."""
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    """Entries of a lower confidence are left out."""
    budget: int | str | None = None
    """At most this much of the view: characters (a number), or "<n> lines", "<n> bytes"."""

    @field_validator("kinds")
    @classmethod
    def _check_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for index, kind in enumerate(value):
            if kind not in KINDS:
                raise KeyedValueError(
                    (index,), f"unknown kind {kind!r} (one of {', '.join(KINDS)})"
                )
        if not value:
            raise ValueError("must not be empty; leave the key out for every kind")
        return value

    @field_validator("budget")
    @classmethod
    def _check_budget(cls, value: int | str | None) -> int | str | None:
        parse_budget(value)
        return value

    @field_validator("scope")
    @classmethod
    def _check_scope(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError(f"scope {value!r}: no leading or trailing spaces, not empty")
        return value

    def selection(self) -> Selection:
        """What of the view goes into the bridged file."""
        return Selection(
            scope=self.scope,
            kinds=self.kinds,
            min_confidence=self.min_confidence,
            budget=parse_budget(self.budget) or Limits(),
        )

    def bridge(self) -> Bridge:
        """The library's description of this bridge."""
        from memsync.local.bridges import Bridge

        return Bridge(self.path, self.format, self.selection())


def sync_configured(
    bridge: BridgeConfig, memory: Path, *, machine: str, state_dir: Path
) -> BridgeResult:
    """Sync `bridge` with the memory file `memory` once (`memsync.local.bridges`, or
    `memsync.local.claude_bridge` for `claude-auto-memory`): what `memsync bridge sync`
    and the daemon do."""
    if bridge.format == "claude-auto-memory":
        from memsync.local.claude_bridge import sync_claude_bridge

        return sync_claude_bridge(memory, bridge.bridge(), machine=machine, state_dir=state_dir)
    from memsync.local.bridges import sync_bridge

    return sync_bridge(memory, bridge.bridge(), machine=machine, state_dir=state_dir)


def watched_files(bridge: BridgeConfig) -> list[Path]:
    """The files whose change calls for a sync of `bridge`: the bridged file (and the
    target of its links), or the project's auto-memory folder (none while Claude Code has
    none for it: the daemon's reconcile pass syncs it all the same)."""
    if bridge.format == "claude-auto-memory":
        from memsync.local.bridge_files import BridgeRefused
        from memsync.local.claude_bridge import find_memory_folder

        try:
            return [find_memory_folder(bridge.path)]
        except BridgeRefused:
            return []
    return sorted({bridge.path, Path(os.path.realpath(bridge.path))})
