"""`Memory.to_prompt` with a state directory (issue 20): answered from the file's
persistent view, the same block as a fold of the whole file, after appends by another
process and whatever happened to the file or the store since."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.local.compaction import compact_file
from memsync.local.memory import Memory
from memsync.local.statedir import StateDir
from memsync.local.viewstore import MIN_BYTES, ViewStore
from tests.helpers.paths import ROOT
from tests.helpers.records import T0, deciding_file, entry

NOW = T0 + 10**12  # past every expiry of `deciding_file`, before the appended entries' time


def _blocks(mem: Memory) -> tuple[str, str, str]:
    return (
        mem.to_prompt(now=NOW, max_chars=4000),
        mem.to_prompt("github.com", now=NOW),
        mem.to_prompt(max_chars=4000),
    )


def _fresh(path: Path) -> tuple[str, str, str]:
    """The blocks from a fold of the whole file, in a process with no cache of it."""
    code = (
        "import sys; from memsync.local.memory import Memory; m = Memory(sys.argv[1]); "
        f"print(repr((m.to_prompt(now={NOW}, max_chars=4000), "
        f"m.to_prompt('github.com', now={NOW}), m.to_prompt(max_chars=4000))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found: tuple[str, str, str] = eval(done.stdout)  # our own repr of three strings
    return found


def _in_new_process(path: Path, state: Path) -> tuple[str, str, str]:
    """The blocks by a `Memory` with `state` as its state directory, in a new process."""
    code = (
        "import sys; from memsync.local.memory import Memory; "
        "m = Memory(sys.argv[1], state_dir=sys.argv[2]); "
        f"print(repr((m.to_prompt(now={NOW}, max_chars=4000), "
        f"m.to_prompt('github.com', now={NOW}), m.to_prompt(max_chars=4000))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(state)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found: tuple[str, str, str] = eval(done.stdout)
    return found


def _resumes(path: Path, state: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return ViewStore(StateDir(state)).resume(path, fd, str(path)) is not None
    finally:
        os.close(fd)


@pytest.mark.slow
def test_to_prompt_from_the_store_is_a_full_folds_after_appends(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 3000)
    assert path.stat().st_size > MIN_BYTES  # the default store's threshold
    state = tmp_path / "state"
    mem = Memory(path, state_dir=state)
    assert _blocks(mem) == _fresh(path)
    assert _resumes(path, state)  # the store was written
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "elsewhere")}
    for args in (
        ["add", str(path), "--kind", "fact", "--text", "appended later"],
        ["forget", str(path), "e00010"],
        ["add", str(path), "--kind", "lesson", "--text", "in scope", "--scope", "github.com"],
    ):
        cmd = [sys.executable, "-m", "memsync", *args]
        subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    assert _resumes(path, state)  # grown only: the store is still used
    expected = _fresh(path)
    assert _blocks(mem) == expected
    assert _in_new_process(path, state) == expected


@pytest.mark.slow
def test_to_prompt_with_a_stale_store_is_never_wrong(tmp_path: Path) -> None:
    path = deciding_file(tmp_path / "me.jsonl", 3000)
    state = tmp_path / "state"
    assert _in_new_process(path, state) == _fresh(path)
    assert _resumes(path, state)

    compact_file(path, horizon_days=0, quiet_seconds=0, grace_seconds=0)  # a new file
    assert not _resumes(path, state)
    assert _in_new_process(path, state) == _fresh(path)

    data = path.read_bytes()  # truncated to half, then grown past its size
    cut = data[: data.index(b"\n", len(data) // 2) + 1]
    with open(path, "r+b") as f:
        f.truncate(len(cut))
        f.seek(len(cut))
        f.write(b"".join(entry(f"n{i:05d}", 9000 + i) + b"\n" for i in range(len(data) // 80)))
    assert not _resumes(path, state)
    assert _in_new_process(path, state) == _fresh(path)


def _view_of(mem: Memory) -> tuple[object, ...]:
    view = mem.view(NOW)
    return (view.records, view.bad, view.twins, view.headerless, len(view.entries))


@pytest.mark.parametrize("header", [True, False])
def test_view_from_the_store_is_a_full_folds(tmp_path: Path, header: bool) -> None:
    """`Memory.view` with a state directory: the same live records, bad lines, twins and
    missing header as a fold of the whole file, from a store written before and one the
    file outgrew (twins, a bad line and a supersession on both sides of it)."""
    path = deciding_file(tmp_path / "me.jsonl", 3000)
    twin = entry("e00004", 4, text="a twin")  # e00004's key, another content (rule 7)
    with open(path, "ab") as f:
        f.write(twin + b"\n{not json\n" + entry("e00005", 5, text="twin two") + b"\n")
    if not header:
        path.write_bytes(path.read_bytes().split(b"\n", 1)[1])
    state = tmp_path / "state"
    stored, whole = Memory(path, state_dir=state), Memory(path)
    expected = _view_of(whole)
    assert expected[2]  # the shapes are there: twins,
    assert expected[1]  # and a bad line
    assert _view_of(stored) == expected
    assert _resumes(path, state)
    assert _view_of(stored) == expected  # from the store
    tail = (
        entry("e00006", 6, text="a tail twin"),
        b"[1, 2]",
        entry("late00000001", 9000, supersedes="e00001"),
        entry("e00007", 9001, user=True),
    )
    with open(path, "ab") as f:
        f.write(b"".join(line + b"\n" for line in tail))
    assert _resumes(path, state)  # grown only: the store is still used
    assert _view_of(stored) == _view_of(whole)
