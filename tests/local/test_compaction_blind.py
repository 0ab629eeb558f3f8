"""Compaction where no detector can tell who holds the file open (issue 23, item 1).

On a Mac before this fix, `/proc` was missing and the writer check answered "nobody": the
quiet check and the forced wait passed while an agent held a long-lived append handle,
the drain ended with its grace period and unlinked the aside link, and the agent's later
lines went to an orphaned inode. Here the checks are made as blind as that (`/proc`
pointed at a folder that does not exist, no other detector), with a real process holding
the file: compaction refuses with one line, and a drain that cannot tell keeps the aside
link, so the late line reaches the file (SEMANTICS rule 16).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memsync import NotQuiet
from memsync.local.compaction import compact_file
from memsync.local.drain import drain, finish_drain
from memsync.local.fresh import header_line
from memsync.local.reading import view_of
from tests.helpers.records import DAY, T0, entry
from tests.helpers.writers import blind, holding, release, say

NOW = T0 + 30 * DAY


def write(path: Path, *lines: bytes) -> Path:
    path.write_bytes(header_line(T0, "0123456789abcdef") + b"".join(x + b"\n" for x in lines))
    path.chmod(0o600)
    return path


def live(path: Path) -> list[bytes]:
    return [rec.raw for rec in view_of([path], NOW).records]


@pytest.mark.parametrize("force", [False, True], ids=["quiet", "forced"])
def test_a_late_append_by_a_holder_is_not_lost_when_no_detector_can_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    path = write(tmp_path / "m.jsonl", entry("a", 1), entry("a", 2))  # something to drop
    blind(monkeypatch, tmp_path)
    with holding(path) as holder:
        say(holder, entry("early", 3))
        refused = ""
        try:
            compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0.2, force=force)
        except NotQuiet as exc:
            refused = str(exc)
        say(holder, entry("late", 4))
        release(holder)
    assert entry("early", 3) in live(path)
    assert entry("late", 4) in live(path)  # lost before the fix
    assert refused == (
        f"{path}: cannot tell which processes hold it open for writing (no /proc, libproc "
        "or lsof); compaction would risk losing their writes"
    )
    assert [n for n in os.listdir(tmp_path) if ".old-" in n] == []


def test_a_drain_that_cannot_tell_keeps_the_aside_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detection lost between the quiet check and the drain: the old inode stays linked
    aside, and the next compaction (able to tell again) copies what the holder wrote."""
    path = write(tmp_path / "m.jsonl", entry("a", 1))
    with holding(path) as holder:
        old_fd = os.open(path, os.O_RDONLY)
        try:
            offset = path.stat().st_size
            aside = tmp_path / f".m.jsonl.old-{os.getpid()}-{offset}"
            os.link(path, aside)
            os.replace(write(tmp_path / "new.jsonl", entry("a", 1)), path)
            say(holder, entry("first", 5))
            with monkeypatch.context() as m:
                blind(m, tmp_path)
                drained = drain(old_fd, offset, path, time.monotonic() + 0.2)
                finish_drain(path, aside, drained, NOW)
        finally:
            os.close(old_fd)
        assert entry("first", 5) in live(path)
        [kept] = [n for n in os.listdir(tmp_path) if ".old-" in n]
        say(holder, entry("second", 6))
        release(holder)
    write_more = entry("a", 0.5)  # something to drop, so that the file is rewritten
    with open(path, "ab") as f:
        f.write(write_more + b"\n")
    compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert entry("second", 6) in live(path)  # lost before the fix
    assert drained.unknown
    assert kept not in os.listdir(tmp_path)
