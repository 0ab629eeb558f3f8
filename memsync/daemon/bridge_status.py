"""The bridges in the daemon's status document (issue 22): each bridge's last sync, and
a refusal, which only a person can fix (a Claude folder not found, a `MEMORY.md` that is
not UTF-8): `memsync status` counts it a problem at once."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from memsync.core.timestamps import format_ts

__all__ = ["BridgeStatus", "bridge_line", "bridge_problems"]


class BridgeStatus(BaseModel):
    """A bridge's last sync by the daemon: when, and why it was refused (None: it was
    not)."""

    model_config = ConfigDict(extra="ignore")

    memory: str
    format: str
    last_sync: int | None = None
    refused: str | None = None
    notes: list[str] = Field(default_factory=list)
    """What the last sync had to say (a file left as it is, entries left out)."""


def bridge_line(path: str, bridge: BridgeStatus) -> str:
    """What `memsync status` says of a bridge: its last sync and how it went."""
    last = "never" if bridge.last_sync is None else format_ts(bridge.last_sync)
    state = "ok" if bridge.refused is None else f"REFUSED: {bridge.refused}"
    if bridge.notes:
        state += f"; {'; '.join(bridge.notes)}"
    return f"bridge {path} ({bridge.format}, memory {bridge.memory}): last sync {last}, {state}"


def bridge_problems(bridges: Mapping[str, BridgeStatus]) -> list[str]:
    """The bridges refused at their last sync, each a problem."""
    return [f"bridge {p}: refused: {b.refused}" for p, b in bridges.items() if b.refused]
