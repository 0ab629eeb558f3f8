"""Choosing the writer detector of `memsync.local.writers` in a test (issue 23, item 1).

`only(monkeypatch, name)` leaves one detector; `blind(monkeypatch, tmp)` leaves none that
can tell, as on a Mac without libproc or lsof: `/proc` pointed at a folder that does not
exist. A detector that cannot run here skips the test, unless CI=true: then it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memsync.local import writers
from memsync.local.writers import procfs

LINUX_DETECTORS = ("procfs", "lsof")
"""The detectors that can run on Linux (libproc is macOS's only)."""


def only(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    chosen = tuple(d for d in writers.DETECTORS if d.name == name)
    assert chosen, name
    if not chosen[0].available():
        if os.environ.get("CI") == "true":
            pytest.fail(f"writer detector {name} cannot run here (CI=true: not skipping)")
        pytest.skip(f"writer detector {name} cannot run here")
    monkeypatch.setattr(writers, "DETECTORS", chosen)


def blind(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    monkeypatch.setattr(procfs, "PROC", tmp / "no-proc")
    monkeypatch.setattr(writers, "DETECTORS", (procfs.ProcFs(),))
    assert writers.find_writers(0, 0) is None


HOLDER = """
import sys
with open(sys.argv[1], "a", encoding="utf-8") as f:
    print("open", flush=True)
    for line in sys.stdin:
        if line == "close\\n":
            break
        f.write(line)
        f.flush()
        print("ok", flush=True)
"""
"""An agent with a long-lived append handle: appends each line it reads, says "ok"."""


@contextmanager
def holding(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A real process holding `path` open for appending (HOLDER), ready; killed on the way
    out if it did not end by itself."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        assert holder.stdout.readline() == "open\n"
        try:
            yield holder
        finally:
            if holder.poll() is None:
                holder.kill()


def say(holder: subprocess.Popen[str], line: bytes) -> None:
    """Have HOLDER append `line`, and wait until it has."""
    assert holder.stdin is not None
    assert holder.stdout is not None
    holder.stdin.write(line.decode() + "\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == "ok\n"


def release(holder: subprocess.Popen[str]) -> None:
    """Tell HOLDER to close the file, and wait for it to end."""
    assert holder.stdin is not None
    holder.stdin.write("close\n")
    holder.stdin.flush()
    assert holder.wait(timeout=30) == 0
