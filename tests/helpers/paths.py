"""Where the tests find the repository's files and the shared steering folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["README", "ROOT", "SHARED"]

ROOT = Path(__file__).resolve().parents[2]
"""The repository: README.md, config.example.toml, systemd/."""

README = ROOT / "README.md"

SHARED = Path(os.environ.get("MEMSYNC_SHARED") or ROOT.parent / "shared")
"""The shared folder beside the repository (SEMANTICS, conformance cases, genmem);
`MEMSYNC_SHARED` points elsewhere."""
