"""The first `prompt` of a large file answers from its fold while a detached process
writes the file's persistent view (issue 20): the same block before and after, the
store there once that process is done, and the right block after it is killed."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.local.statedir import StateDir
from memsync.local.viewstore import DETACH_BYTES
from tests.helpers.generated import genmem_file

pytestmark = [pytest.mark.slow, pytest.mark.linux_only]  # the builder is found in /proc

NOW = "2026-12-01T00:00:00Z"


@pytest.fixture(scope="module")
def memory_60k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """genmem.py's 60,000 records (about 19 MB: over `DETACH_BYTES`, quick to fold), for
    the tests that need no writer running for long."""
    return genmem_file(tmp_path_factory, 60_000)


@pytest.fixture(scope="module")
def memory_300k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """genmem.py's 300,000 records (about 95 MB), made once for all workers."""
    return genmem_file(tmp_path_factory, 300_000)


def _prompt(
    path: Path,
    state: Path,
    more: tuple[str, ...] | list[str] = (),
    before: Callable[[], object] | None = None,
) -> tuple[list[str], str]:
    """`memsync prompt` of `path` in a process of its own (`before` run in it first); its
    command line and output."""
    argv = [sys.executable, "-m", "memsync", "prompt", str(path), "--max-chars", "4000"]
    argv += ["--now", NOW, *more]
    done = subprocess.run(
        argv,
        preexec_fn=before,  # (the test process starts no threads of its own)
        env={**os.environ, "XDG_STATE_HOME": str(state)},
        capture_output=True,
        text=True,
        timeout=120,  # a builder holding the output pipe would hold this until then
        check=True,
    )
    assert done.stdout.startswith("# Memory\n")
    return argv, done.stdout


def _running(argv: list[str]) -> list[int]:
    """The processes running `argv` (the command's own forks: its detached builder)."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline") as f:
                    if f.read() == wanted:
                        found.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return found


def _until_gone(argv: list[str], seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while _running(argv):
        assert time.monotonic() < deadline, f"the detached builder still runs after {seconds} s"
        time.sleep(0.02)


def test_the_first_prompt_answers_before_its_store_is_written(
    tmp_path: Path, memory_300k: Path
) -> None:
    path = tmp_path / "m.jsonl"
    shutil.copyfile(memory_300k, path)
    assert path.stat().st_size >= DETACH_BYTES
    state = tmp_path / "state"
    views = StateDir(state / "memsync")

    argv, cold = _prompt(path, state)
    # Answered, its output closed, while the builder runs (over a second of work at 300k,
    # where the block took a fraction of one).
    assert _running(argv)
    _until_gone(argv)
    assert views.view_store(path).exists()
    assert views.view_ranks(path).exists()
    stamp = views.view_ranks(path).stat().st_mtime_ns
    _, warm = _prompt(path, state)
    assert warm == cold  # from the quick part now, as from the fold
    assert views.view_ranks(path).stat().st_mtime_ns == stamp  # read, not written again


def test_a_prompt_while_the_store_is_written_writes_it_no_second_time(
    tmp_path: Path, memory_300k: Path
) -> None:
    """A second command right after the first, while its writer runs, answers the same
    as ever and does not write the store again beside it, on the same cores: it waits
    for the store (the build lock) or resumes from the part already written, and what it
    has left to write waits for the first writer and finds it written."""
    path = tmp_path / "m.jsonl"
    shutil.copyfile(memory_300k, path)
    other = ["--scope", "github.com"]  # another command line: its processes are its own
    state = tmp_path / "state"
    first, _ = _prompt(path, state)
    assert _running(first)
    second, again = _prompt(path, state, other)
    _until_gone(first)
    views = StateDir(state / "memsync")
    stamp = views.view_ranks(path).stat().st_mtime_ns
    _until_gone(second)
    assert views.view_ranks(path).stat().st_mtime_ns == stamp  # the first's, not again
    # The same block as from the store once it is whole (whose answers the first test
    # holds to the fold's).
    assert _prompt(path, state, other)[1] == again


def test_a_builder_killed_at_any_moment_leaves_the_right_answer(
    tmp_path: Path, memory_300k: Path
) -> None:
    path = tmp_path / "m.jsonl"
    shutil.copyfile(memory_300k, path)
    rng = random.Random(20)
    killed = 0
    expected = None  # the first cold block, from the fold: every answer after is the same
    for n in range(2):
        state = tmp_path / f"state{n}"
        argv, cold = _prompt(path, state)
        expected = expected or cold
        assert cold == expected
        time.sleep(rng.uniform(0.0, 0.8))  # somewhere in the fold's copy, the build, the write
        for pid in _running(argv):
            with contextlib.suppress(ProcessLookupError):  # (a build's child, gone since)
                os.kill(pid, signal.SIGKILL)
                killed += 1
        _until_gone(argv)
        argv, after = _prompt(path, state)  # from what the killed writer left, or none
        assert after == expected
        _until_gone(argv)
    assert killed  # (the builder of 300k records runs for over a second)


@pytest.mark.parametrize(
    "before",
    [
        pytest.param(lambda: os.close(0), id="stdin-closed"),
        pytest.param(lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN), id="sigchld-ignored"),
    ],
)
def test_where_no_writer_can_be_detached_the_command_writes_the_store_itself(
    tmp_path: Path, memory_60k: Path, before: Callable[[], object]
) -> None:
    """Started with its standard input closed (the memory file then open as descriptor 0,
    which a detached writer gives up), or with SIGCHLD ignored (no child can be waited
    for): the same block, and a valid store when the command returns, which the next
    command reads without writing it again."""
    path = tmp_path / "m.jsonl"
    shutil.copyfile(memory_60k, path)
    assert path.stat().st_size >= DETACH_BYTES
    argv, expected = _prompt(path, tmp_path / "reference")
    _until_gone(argv)
    state = tmp_path / "state"
    views = StateDir(state / "memsync")
    argv, cold = _prompt(path, state, before=before)
    assert cold == expected
    assert not _running(argv)
    stamp = views.view_ranks(path).stat().st_mtime_ns
    assert _prompt(path, state)[1] == expected
    assert views.view_ranks(path).stat().st_mtime_ns == stamp  # valid: read, not rewritten


def test_a_writer_whose_file_was_replaced_meanwhile_writes_no_quick_part_for_it(
    tmp_path: Path, memory_300k: Path
) -> None:
    """The file is replaced (as a compaction replaces it) while the writer builds: the
    writer leaves no quick part of the old file, and the next command answers from the
    new one."""
    path = tmp_path / "m.jsonl"
    shutil.copyfile(memory_300k, path)
    state = tmp_path / "state"
    views = StateDir(state / "memsync")
    argv, expected = _prompt(path, state)
    writers = _running(argv)
    assert writers
    for pid in writers:  # held still while the file is replaced
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    assert not views.view_ranks(path).exists()  # (written last: not yet)
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(memory_300k, copy)
    os.replace(copy, path)
    for pid in writers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    _until_gone(argv)
    assert not views.view_ranks(path).exists()
    argv, again = _prompt(path, state)
    assert again == expected
    _until_gone(argv)
    assert views.view_ranks(path).exists()  # the new file's, written since
