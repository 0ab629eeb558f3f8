"""memsync's version, in a module of its own: what any module may import without importing
the package's lazy names (`memsync.hub.receipts` writes it in every receipt)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
