"""One memory file on this machine: storage, locks, reading, the file index, merge,
compaction, and the `Memory` facade on top of them (DESIGN.md, "local")."""

from __future__ import annotations

__all__: list[str] = []
