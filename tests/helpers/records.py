"""Hand-made record lines for the compaction and merge tests: one line per call, times
given in seconds after `T0`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync.core.timestamps import SECOND, format_ts, parse_ts
from tests.helpers.paths import ROOT
from tests.helpers.strategies import HEADER

__all__ = ["DAY", "T0", "append_to_deciding_file", "at", "deciding_file", "entry", "tomb"]

T0 = parse_ts("2026-01-01T00:00:00Z") or 0
DAY = 24 * 3600 * SECOND


def at(seconds: float) -> str:
    return format_ts(T0 + round(seconds * SECOND))


def entry(
    rid: str,
    t: float,
    *,
    text: str | None = None,
    user: bool = False,
    supersedes: str | None = None,
    expires: float | None = None,
    **extra: Any,
) -> bytes:
    obj: dict[str, Any] = {
        "id": rid,
        "kind": "fact",
        "text": text if text is not None else f"{rid} written at {t}",
        "source": "user" if user else "session:test",
        "created_at": at(t),
    }
    if supersedes is not None:
        obj["supersedes"] = supersedes
    if expires is not None:
        obj["expires_at"] = at(expires)
    obj.update(extra)
    return json.dumps(obj).encode()


def tomb(rid: str, t: float) -> bytes:
    return json.dumps({"id": rid, "deleted": True, "created_at": at(t)}).encode()


def deciding_file(path: Path, n: int) -> Path:
    """n entries, every 7th forgotten, every 11th superseded, a few expired: what decides
    the view is in the folded bytes, not only live versions."""
    lines = [HEADER]  # the header memsync writes
    for i in range(n):
        lines.append(entry(f"e{i:05d}", i, scope="global" if i % 3 else "github.com"))
        if i % 7 == 3:
            lines.append(tomb(f"e{i:05d}", i + 0.5))
        if i % 11 == 5:
            lines.append(entry(f"s{i:05d}", i + 0.25, supersedes=f"e{i:05d}"))
        if i % 13 == 2:
            lines.append(entry(f"x{i:05d}", i + 0.75, expires=1.0))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def append_to_deciding_file(path: Path, env: Mapping[str, str]) -> None:
    """To a `deciding_file`, as another process would (`memsync add` and `forget` run in
    the environment `env`): an entry, a tombstone of e00010 and an entry of github.com."""
    run = [sys.executable, "-m", "memsync"]
    for args in (
        ["add", str(path), "--kind", "fact", "--text", "appended later"],
        ["forget", str(path), "e00010"],
        ["add", str(path), "--kind", "lesson", "--text", "in scope", "--scope", "github.com"],
    ):
        subprocess.run([*run, *args], check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
