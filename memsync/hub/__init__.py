"""Between machines: one sync pass, its state and digests, watermarks, our own hub file
and its compaction, and the transports (DESIGN.md, "hub")."""

from __future__ import annotations

__all__: list[str] = []
