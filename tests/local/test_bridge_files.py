"""`memsync.local.bridge_files`: a bridged file replaced while someone else writes it in
place keeps their bytes (issue 22, item 4). A person's editor or an agent that writes in
place truncates the file first and writes after: memsync must neither replace the
truncated file under them (their bytes would land in the file it replaced) nor lose a
write that lands between its check and its rename."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsync.core.bridge_block import Selection, locate
from memsync.local import bridge_files
from memsync.local.bridge_files import BridgeRefused, read_bridged, replace_if_unchanged
from memsync.local.bridges import Bridge, sync_bridge
from memsync.local.memory import Memory
from memsync.local.reading import view_of

PERSON = "# Project\n\nRun `make lint` before committing.\n"

# Truncates the file (as `open(path, "w")` does), says so, and writes its bytes only
# after a pause shorter than SETTLE_NS: a slow writer in place, caught mid-write.
SLOW_WRITER = """
import sys, time
path, pause, text = sys.argv[1], float(sys.argv[2]), sys.argv[3]
with open(path, "w", encoding="utf-8") as f:
    print("truncated", flush=True)
    time.sleep(pause)
    f.write(text)
"""


def test_a_file_truncated_by_a_writer_is_not_replaced_before_its_bytes_land(
    tmp_path: Path,
) -> None:
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "Staging needs the VPN.")
    mem.add("fact", "Deploys run on Tuesdays.")
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    bridge = Bridge(agents, "agents-md", Selection())
    state = tmp_path / "state"
    assert sync_bridge(mem.path, bridge, machine="m1", state_dir=state).written
    # The person deletes one line of the block, with an editor that writes in place.
    edited = agents.read_text(encoding="utf-8").replace("- Fact: Deploys run on Tuesdays.\n", "")
    assert edited != agents.read_text(encoding="utf-8")
    with subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(agents), "0.05", edited],
        stdout=subprocess.PIPE,
    ) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"truncated\n"
        # memsync syncs while the file is empty: it must wait for the write, then read it.
        sync_bridge(mem.path, bridge, machine="m1", state_dir=state)
        assert writer.wait(10) == 0
    text = agents.read_text(encoding="utf-8")
    span = locate(text)
    assert span is not None
    assert text[: span.start] + text[span.stop :] == PERSON  # the person's bytes kept
    assert "Deploys run on Tuesdays." not in text
    texts = [r.fields()["text"] for r in view_of([mem.path]).records]
    assert texts == ["Staging needs the VPN."]  # the deletion was read as one


OURS = b"memsync's version\n"
BEFORE = PERSON.encode()


@pytest.fixture(params=["swap", "rename"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of replacing: swapping the two files in one step (Linux's renameat2,
    macOS's renamex_np), and renaming over where the system has no such call (forced)."""
    if request.param == "rename":
        monkeypatch.setattr(bridge_files, "_swap_call", lambda: None)
    elif bridge_files._swap_call() is None:
        pytest.skip("this system swaps no files")
    return str(request.param)


def _aged(tmp_path: Path) -> Path:
    """The person's AGENTS.md, last written a minute ago (no wait to settle)."""
    path = tmp_path / "AGENTS.md"
    path.write_bytes(BEFORE)
    os.utime(path, (time.time() - 60, time.time() - 60))
    return path


def _meanwhile(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Run `act` just after memsync checked the file and before it replaces it: another
    writer's action in that window (the real replace follows)."""
    real = bridge_files._replace_held

    def late(*args: Any) -> bool:
        act()
        return real(*args)

    monkeypatch.setattr(bridge_files, "_replace_held", late)


def _left(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def test_a_write_in_place_between_the_check_and_the_replace_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    path = _aged(tmp_path)
    snap = read_bridged(path)

    def write_in_place() -> None:
        with open(path, "r+b") as f:
            f.write(b"THEIRS")

    _meanwhile(monkeypatch, write_in_place)
    assert replace_if_unchanged(snap, OURS) is False  # not written: the caller reads again
    assert path.read_bytes() == b"THEIRS" + BEFORE[len("THEIRS") :]
    assert _left(tmp_path) == ["AGENTS.md"]  # no temp file left


def test_a_writer_that_truncated_before_the_replace_and_writes_after_keeps_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """`open(path, "w")` lands in the window, its `write` 50 ms later, after memsync read
    the old file again (found in a review: the emptied file was put back, and the
    person's whole file lost)."""
    path = _aged(tmp_path)
    snap = read_bridged(path)
    edited = BEFORE + b"An edit by the person.\n"
    writers: list[threading.Timer] = []

    def truncate_then_write() -> None:
        f = open(path, "wb")  # noqa: SIM115 (closed by the timer)

        def write() -> None:
            f.write(edited)
            f.close()

        writers.append(threading.Timer(0.05, write))
        writers[0].start()

    _meanwhile(monkeypatch, truncate_then_write)
    assert replace_if_unchanged(snap, OURS) is False
    writers[0].join()
    assert path.read_bytes() == edited
    assert _left(tmp_path) == ["AGENTS.md"]


def test_writes_on_both_sides_of_the_replace_are_both_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """An agent appends to the old file in the window, then appends again to the new
    one (found in a review: the first append was dropped). The new file stands; the old
    one, with the first append, is kept beside it and named in the log."""
    path = _aged(tmp_path)
    snap = read_bridged(path)

    def append(line: bytes) -> None:
        with open(path, "ab") as f:
            f.write(line)

    _meanwhile(monkeypatch, lambda: append(b"X: the agent's first line\n"))
    real = bridge_files._settled

    def settled(*args: Any) -> bytes:  # just after the replace
        append(b"Y: the agent's second line\n")
        return real(*args)

    monkeypatch.setattr(bridge_files, "_settled", settled)
    assert replace_if_unchanged(snap, OURS) is False
    assert path.read_bytes() == OURS + b"Y: the agent's second line\n"
    [kept] = [p for p in tmp_path.iterdir() if p.name != "AGENTS.md"]
    assert kept.name.startswith("AGENTS.md.memsync-conflict-")
    assert kept.read_bytes() == BEFORE + b"X: the agent's first line\n"


def test_a_file_replaced_by_another_writer_in_the_window_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor that saves by a temp file and a rename, between memsync's check and its
    swap (found in a review: its file was replaced and True returned). Where files are
    swapped, theirs is swapped back; renaming over it, it is lost: the one window left
    where the system cannot swap (README)."""
    if bridge_files._swap_call() is None:
        pytest.skip("this system swaps no files")
    path = _aged(tmp_path)
    snap = read_bridged(path)

    def save_by_rename() -> None:
        theirs = tmp_path / "AGENTS.md.editor-tmp"
        theirs.write_bytes(BEFORE + b"The editor's save.\n")
        os.replace(theirs, path)

    _meanwhile(monkeypatch, save_by_rename)
    assert replace_if_unchanged(snap, OURS) is False
    assert path.read_bytes() == BEFORE + b"The editor's save.\n"
    assert _left(tmp_path) == ["AGENTS.md"]


def test_a_full_disk_when_putting_bytes_back_loses_none_where_files_are_swapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped, the old file goes back as it is: nothing to write, so no full disk can
    lose the late bytes (found in a review: renaming over, they were copied back, and a
    full disk left them nowhere)."""
    if bridge_files._swap_call() is None:
        pytest.skip("this system swaps no files")
    path = _aged(tmp_path)
    snap = read_bridged(path)

    def late_append() -> None:
        with open(path, "ab") as f:
            f.write(b"late\n")
        monkeypatch.setattr(bridge_files, "write_all", _full_disk)

    _meanwhile(monkeypatch, late_append)
    assert replace_if_unchanged(snap, OURS) is False
    assert path.read_bytes() == BEFORE + b"late\n"


def test_a_file_that_cannot_be_swapped_back_is_kept_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written in place in the window, the old file goes back by a second swap; should
    that one fail, the old file is kept beside the target, not removed as a temp file."""
    if bridge_files._swap_call() is None:
        pytest.skip("this system swaps no files")
    path = _aged(tmp_path)
    snap = read_bridged(path)
    real = bridge_files._swap
    calls: list[int] = []

    def once(a: Path, b: Path) -> bool:
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(b))
        return real(a, b)

    def late_append() -> None:
        with open(path, "ab") as f:
            f.write(b"late\n")

    monkeypatch.setattr(bridge_files, "_swap", once)
    _meanwhile(monkeypatch, late_append)
    with pytest.raises(OSError, match="Input/output error"):
        replace_if_unchanged(snap, OURS)
    assert path.read_bytes() == OURS
    [kept] = [p for p in tmp_path.iterdir() if p.name != "AGENTS.md"]
    assert kept.name.startswith("AGENTS.md.memsync-conflict-")
    assert kept.read_bytes() == BEFORE + b"late\n"


def _full_disk(fd: int, data: bytes) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_write_error_names_the_bridged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _aged(tmp_path)
    monkeypatch.setattr(bridge_files, "write_all", _full_disk)
    with pytest.raises(OSError, match="No space left") as exc:
        replace_if_unchanged(read_bridged(path), OURS)
    assert exc.value.filename == str(path)
    assert path.read_bytes() == BEFORE
    assert _left(tmp_path) == ["AGENTS.md"]


def test_a_temp_file_a_killed_memsync_linked_is_swept_not_refused(tmp_path: Path) -> None:
    """A kill -9 between linking a new file's temp file in and removing it leaves a second
    hard link (found in a review: every later sync was refused for it, for good)."""
    path = tmp_path / "AGENTS.md"
    path.write_bytes(OURS)
    os.utime(path, (time.time() - 60, time.time() - 60))
    os.link(path, tmp_path / ".AGENTS.md.memsync-999999-abcd1234")  # no such process
    assert replace_if_unchanged(read_bridged(path), b"new\n")
    assert path.read_bytes() == b"new\n"
    assert _left(tmp_path) == ["AGENTS.md"]
    other = tmp_path / "other-name.md"
    os.link(path, other)  # the person's own second link: still refused
    with pytest.raises(BridgeRefused, match="2 hard links"):
        replace_if_unchanged(read_bridged(path), b"newer\n")


def test_a_file_timed_a_little_ahead_is_still_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network file system's clock 50 ms ahead: the file just written is waited for
    (found in a review: only a file timed 0 to 0.3 s in the past was)."""
    path = tmp_path / "AGENTS.md"
    path.write_bytes(b"")  # just truncated by a writer in place
    ahead = time.time_ns() + 50_000_000
    os.utime(path, ns=(ahead, ahead))
    started = time.monotonic()
    assert replace_if_unchanged(read_bridged(path), OURS)
    assert time.monotonic() - started >= bridge_files.SETTLE_NS / 1e9 * 0.9


def test_a_file_timed_in_the_future_is_not_waited_for(tmp_path: Path) -> None:
    """A network file system's clock an hour ahead of this machine's: replaced without
    waiting for the two clocks to meet."""
    path = tmp_path / "AGENTS.md"
    path.write_text(PERSON, encoding="utf-8")
    later = time.time() + 3600
    os.utime(path, (later, later))
    snap = read_bridged(path)
    started = time.monotonic()
    assert replace_if_unchanged(snap, b"memsync's version\n")
    assert time.monotonic() - started < 60
    assert path.read_bytes() == b"memsync's version\n"
