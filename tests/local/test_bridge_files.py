"""`memsync.local.bridge_files`: a bridged file replaced while someone else writes it in
place keeps their bytes (issue 22, item 4). A person's editor or an agent that writes in
place truncates the file first and writes after: memsync must neither replace the
truncated file under them (their bytes would land in the file it replaced) nor lose a
write that lands between its check and its rename."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from memsync.core.bridge_block import Selection, locate
from memsync.local.bridge_files import read_bridged, replace_if_unchanged
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


# Replaces a file while, just before the rename, another writer writes the old file in
# place (a write that lands between memsync's check and its rename).
LATE_WRITE = """
import os, sys
from pathlib import Path
from memsync.local.bridge_files import read_bridged, replace_if_unchanged

path = Path(sys.argv[1])
snap = read_bridged(path)
replace = os.replace

def written_meanwhile(src, dst):
    if Path(dst) == path:
        with open(path, "r+b") as f:
            f.write(b"THEIRS")
    replace(src, dst)

os.replace = written_meanwhile
print(replace_if_unchanged(snap, b"memsync's version\\n"))
"""


def test_a_write_landing_between_the_check_and_the_rename_is_put_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text(PERSON, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", LATE_WRITE, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "False\n"  # not written: the caller reads again
    assert path.read_bytes() == b"THEIRS" + PERSON.encode()[len("THEIRS") :]
    assert [p.name for p in tmp_path.iterdir()] == ["AGENTS.md"]  # no temp file left


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
