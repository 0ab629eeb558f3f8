"""memsync in a git repository (issue 22, item 6): the merge driver's file work and
`memsync git setup`.

git runs its merge driver with three temporary files, BASE (%O), OURS (%A) and THEIRS
(%B), and takes the merge from OURS when the driver exits 0 (a non-zero exit is a
conflict, with OURS as it was). What to merge is `memsync.core.gitmerge`'s business; this
module reads the three files, replaces OURS whole, and talks to `git` for the setup.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memsync.core.gitmerge import GitMerge, gitattributes_with, merge_three
from memsync.errors import MemsyncError
from memsync.local.storage import atomic_replace, write_all

__all__ = [
    "DEFAULT_PATTERNS",
    "DRIVER_NAME",
    "GitSetup",
    "driver_command",
    "git_setup",
    "repository_root",
    "run_merge_driver",
]

DRIVER_NAME = "memsync"
DEFAULT_PATTERNS = ("*.jsonl",)
"""What `git setup` registers when it is told nothing and no configured memory lives in the
repository. Safe for JSON Lines files that are not memories: their lines are bad lines to
memsync, and the driver then leaves a conflict, as git's own merge would."""

_GITATTRIBUTES_MODE = 0o644
"""A `.gitattributes` is a repository file, committed and shared; it holds no memory."""


def run_merge_driver(base: Path, ours: Path, theirs: Path, name: str) -> GitMerge:
    """Merge THEIRS into OURS given BASE (rule 14, `merge_three`), replacing OURS whole
    (a temp file renamed over it) only once the merge is made.

    Raises:
        MemsyncError: the merge is refused (OURS is left as it was).
        OSError: a file cannot be read or OURS cannot be written.
    """
    result = merge_three(base.read_bytes(), ours.read_bytes(), theirs.read_bytes(), name=name)
    atomic_replace(ours, result.data)
    return result


def driver_command(python: str = sys.executable) -> str:
    """The `merge.memsync.driver` value: this Python's memsync (so that git finds it from
    any shell, virtualenv or not), with git's placeholders."""
    return f"{shlex.quote(python)} -m memsync merge-driver %O %A %B %P"


@dataclass(frozen=True, slots=True)
class GitSetup:
    """What `git_setup` did: the repository, its `.gitattributes`, the patterns added
    there (those already present are not repeated) and the driver command configured."""

    root: Path
    attributes: Path
    added: list[str]
    command: str


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise MemsyncError("git: not found (install git first)") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise MemsyncError(f"git {' '.join(args[:2])}: {why}")
    return done.stdout


def repository_root(cwd: Path) -> Path:
    """The top of the working tree `cwd` is in.

    Raises:
        MemsyncError: `cwd` is not in a git working tree.
    """
    if not cwd.is_dir():
        raise MemsyncError(f"{cwd}: no such folder")
    try:
        out = _git(["rev-parse", "--show-toplevel"], cwd)
    except MemsyncError:
        raise MemsyncError(f"{cwd}: not in a git repository") from None
    return Path(out.strip())


def git_setup(root: Path, patterns: Sequence[str], command: str | None = None) -> GitSetup:
    """Make git merge the files `patterns` match in the repository at `root` with memsync:
    a `PATTERN merge=memsync` line each in `root/.gitattributes` (created if missing,
    existing lines kept byte for byte), and `merge.memsync.name` and `.driver` in the
    repository's own config (`.git/config`: git never runs a command a clone brought).

    Idempotent: running it again adds nothing and sets the same values.
    """
    command = command if command is not None else driver_command()
    attributes = root / ".gitattributes"
    try:
        before = attributes.read_bytes().decode("utf-8")  # no newline translation
    except FileNotFoundError:
        before = ""
    after = gitattributes_with(before, patterns, DRIVER_NAME)
    added = [line.split()[0] for line in after[len(before) :].splitlines() if line.strip()]
    if after != before:
        fd = os.open(attributes, os.O_WRONLY | os.O_CREAT | os.O_APPEND, _GITATTRIBUTES_MODE)
        try:
            # Only appended: what was there stays byte for byte (gitattributes_with adds
            # at the end, after a "\n" if the last line had none).
            write_all(fd, after[len(before) :].encode("utf-8"))
        finally:
            os.close(fd)
    _git(["config", "--local", f"merge.{DRIVER_NAME}.name", "memsync: merge memory files"], root)
    _git(["config", "--local", f"merge.{DRIVER_NAME}.driver", command], root)
    return GitSetup(root, attributes, added, command)
