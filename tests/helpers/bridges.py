"""The view of record objects as the entries a bridge renders: the real rules (classify,
`Index`, `build_view`), for round trips through a bridge's block (issue 22)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memsync.core.lines import classify
from memsync.core.prompt import PromptEntry, entry_of
from memsync.core.records import Record
from memsync.core.view import Index, build_view
from tests.helpers.vendor_files import claude_memory_folder

__all__ = ["NOW", "claude_project", "entries_of", "superseded_in"]

NOW = 4_000_000_000_000_000
"""An instant (µs) after every record these tests write."""


def _records(objs: Iterable[dict[str, Any]]) -> list[Record]:
    out = []
    for obj in objs:
        rec = classify(json.dumps(obj, ensure_ascii=False).encode("utf-8"))
        assert isinstance(rec, Record), obj
        out.append(rec)
    return out


def entries_of(objs: Iterable[dict[str, Any]]) -> list[PromptEntry]:
    """The live entries of the records `objs` (SEMANTICS rules 8 to 12) at `NOW`."""
    index = Index()
    for rec in _records(objs):
        index.add(rec)
    return [entry_of(rec) for rec in build_view(index, NOW).live]


def superseded_in(objs: Iterable[dict[str, Any]]) -> set[str]:
    """The ids some record of `objs` supersedes (rule 10)."""
    return {r.supersedes for r in _records(objs) if r.supersedes is not None}


def claude_project(
    claude_dir: Path,
    repo: Path,
    cwd: Path | None = None,
    *,
    memories: bool = True,
    name: str | None = None,
) -> Path:
    """Claude Code's folder of project `repo` under `claude_dir` (`~/.claude`): a session
    transcript whose lines name the `cwd` Claude ran in (as Claude Code writes them: one
    JSON object a line with `cwd`, `sessionId`, `type`), and the memory folder of
    `tests.helpers.vendor_files` (its MEMORY.md and topic files). Returns the memory
    folder (empty without `memories`: Claude ran there, remembered nothing yet). The
    folder's name is the lossy encoding of the path, as Claude makes it, or `name`."""
    name = name or re.sub(r"[^A-Za-z0-9]", "-", str(repo))
    project = claude_dir / "projects" / name
    project.mkdir(parents=True)
    line = {
        "type": "user",
        "cwd": str(cwd or repo),
        "sessionId": "0b0e6c1e-2f7a-4c2b-9d1e-5f0a3c7d8e21",
        "message": {"role": "user", "content": "remember that staging needs the VPN"},
    }
    (project / "0b0e6c1e-2f7a-4c2b-9d1e-5f0a3c7d8e21.jsonl").write_text(json.dumps(line) + "\n")
    if not memories:
        (project / "memory").mkdir()
        return project / "memory"
    claude_memory_folder(project / "tmp").rename(project / "memory")
    shutil.rmtree(project / "tmp")
    return project / "memory"
