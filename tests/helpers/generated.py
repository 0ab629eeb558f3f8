"""Generated inputs shared by every xdist worker of one test session: made once, under a
file lock, in the session's common temporary folder (pytest-xdist's recipe for
session-wide fixtures), instead of once per worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from tests.helpers.paths import SHARED

__all__ = ["GENMEM", "genmem_file"]

GENMEM = SHARED / "tools" / "genmem.py"


def genmem_file(factory: pytest.TempPathFactory, entries: int) -> Path:
    """genmem.py's memory of `entries` records, generated once per test session."""
    assert GENMEM.is_file(), f"no {GENMEM} (set MEMSYNC_SHARED?)"
    # Under xdist, each worker's base is <session root>/popen-gwN: the root is common to
    # all the session's workers (and to no other session).
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = root / f"genmem-{entries}.jsonl"
    with FileLock(str(out) + ".lock"):
        if not out.exists():
            part = out.with_suffix(".part")
            subprocess.run(
                [sys.executable, str(GENMEM), str(part), "--entries", str(entries)],
                check=True,
                timeout=120,
            )
            part.rename(out)  # whole or absent: a worker killed mid-way leaves no half file
    return out
