"""The pure core: SEMANTICS rules as functions of bytes and `now`. No I/O, no clock, no logs."""

from __future__ import annotations

__all__: list[str] = []
