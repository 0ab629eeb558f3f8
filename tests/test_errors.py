"""The exception tree (errors.py): every error is a `MemsyncError`, carries its fields, reads
well as a string and survives pickling."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import memsync
from memsync import Memory, open_transport
from memsync.cli import main
from memsync.errors import (
    DaemonAlreadyRunning,
    FileReplaced,
    MemsyncError,
    TransportError,
    TransportTimeout,
    UnknownId,
    UsageError,
    shown,
)

EXAMPLES: list[MemsyncError] = [
    UnknownId("me.jsonl", "3f9a1c2b7d10"),
    UnknownId("me.jsonl", "3f9a1c2b7d10", live=True),
    FileReplaced("me.jsonl", "handoff"),
    DaemonAlreadyRunning("/var/lib/memsync"),
    UsageError("merge: cannot merge a file into itself"),
    TransportError("ssh://me@vm:22/hub/a.jsonl: connection reset", "vm", "/hub/a.jsonl"),
    TransportTimeout("ssh://me@vm:22/hub: timed out", "vm", "/hub"),
]


@pytest.mark.parametrize("exc", EXAMPLES, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_their_fields(exc: MemsyncError) -> None:
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert str(again) == str(exc)
    assert vars(again) == vars(exc)


def test_every_public_error_is_in_the_tree() -> None:
    errors = [
        v for v in vars(memsync.errors).values() if isinstance(v, type) and issubclass(v, Exception)
    ]
    assert all(issubclass(e, MemsyncError) for e in errors)
    helpers = {"SHOWN_CHARS", "shown"}  # how every message quotes a name (issue 19)
    assert {e.__name__ for e in errors} == set(memsync.errors.__all__) - helpers


def test_messages_read_well() -> None:
    assert str(UnknownId("me.jsonl", "abc")) == "me.jsonl: no record with id 'abc'"
    assert str(UnknownId("me.jsonl", "abc", live=True)) == "me.jsonl: no live entry with id 'abc'"
    assert str(FileReplaced("f")) == "f: replaced repeatedly during the merge; try again"
    assert isinstance(FileReplaced("f"), OSError)
    assert "/var/lib/memsync" in str(DaemonAlreadyRunning("/var/lib/memsync"))


def test_forget_of_an_unknown_id(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "m.jsonl")
    with pytest.raises(UnknownId) as info:
        mem.forget("000000000000")
    assert (info.value.file, info.value.id) == (str(mem.path), "000000000000")
    with pytest.raises(UnknownId) as info:
        mem.supersede("000000000000", "New text.")
    assert info.value.live


def test_transport_errors_name_host_and_path(tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir()
    hub = open_transport("file", str(tmp_path / "hub"))
    with pytest.raises(TransportError) as info:
        hub.read("notes", "a.jsonl", 0, 10)
    assert info.value.host is None
    assert info.value.path == str(tmp_path / "hub" / "notes" / "a.jsonl")
    with pytest.raises(TransportError) as info:
        open_transport("ftp", "/srv/hub", host="vm")
    assert (info.value.host, info.value.path) == ("vm", "/srv/hub")


# --- the CLI's messages (issue 13, item 21): one line, naming the file -----------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    """Run the command line; return its status and its stderr, checked to be one line."""
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return status, err.strip()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder as the working directory, with the state directory inside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    Memory.open(tmp_path / "good.jsonl").add("fact", "A fact.")
    (tmp_path / "folder").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "folder", "--kind", "fact", "--text", "x"],
        ["forget", "folder", "a1a1a1a1a1a1"],
        ["merge", "good.jsonl", "--into", "folder"],
        ["merge", "good.jsonl", "--into", "folder", "--no-index"],
        ["handoff", "good.jsonl", "folder"],
        ["recall", "folder", "fact"],
        ["export", "--markdown", "folder"],
        ["export", "--markdown", "good.jsonl", "folder"],
        ["import", "--from", "mcp-memory", "folder", "good.jsonl"],
        ["mcp", "folder"],
    ],
    ids=" ".join,
)
def test_a_folder_where_a_file_belongs_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A folder was `[Errno 21] Is a directory` without its name (a read's error), or
    "no such file or directory" (recall, export, import)."""
    status, err = _cli(capsys, *argv)
    assert status == 2
    assert err.startswith("memsync: folder: is a folder, not a"), err


@pytest.mark.parametrize(
    "argv",
    [
        ["merge", "good.jsonl", "--into", "newer.jsonl"],
        ["merge", "good.jsonl", "--into", "newer.jsonl", "--no-index"],
        ["handoff", "good.jsonl", "newer.jsonl"],
    ],
    ids=" ".join,
)
def test_a_destination_in_a_newer_format_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Rule 2's refusal named the destination `<bytes>`, classify's default source."""
    newer = workdir / "newer.jsonl"
    newer.write_bytes(b'{"format": "agent-memory/1.0"}\n')
    before = newer.read_bytes()
    status, err = _cli(capsys, *argv)
    assert status == 2
    assert err.startswith("memsync: newer.jsonl:1: unsupported format 'agent-memory/1.0'"), err
    assert newer.read_bytes() == before


@pytest.mark.parametrize("into", ["there.jsonl", "new-folder/there.jsonl"])
def test_add_through_a_dangling_symlink_makes_the_file_it_points_to(
    workdir: Path, capsys: pytest.CaptureFixture[str], into: str
) -> None:
    """`add` said "file exists" for a symlink to a file not made yet, where merge and
    compaction follow the link; now it follows it too, like `echo >> link` would."""
    link = workdir / "link.jsonl"
    link.symlink_to(workdir / into)
    assert main(["add", str(link), "--kind", "fact", "--text", "Through the link."]) == 0
    assert link.is_symlink()
    assert "Through the link." in (workdir / into).read_text(encoding="utf-8")
    assert stat.S_IMODE((workdir / into).stat().st_mode) == 0o600
    assert main(["show", str(link)]) == 0
    assert "Through the link." in capsys.readouterr().out


LONG = "a1" * 5000  # a 10 kB id, pasted by mistake


@pytest.mark.parametrize(
    "argv",
    [
        ["forget", "good.jsonl", LONG],
        ["forget-replica", LONG],
        ["mcp", "--memory", LONG],
        ["sync", "--config", "config.toml", "--memory", LONG],
        ["sync", "--config", "config.toml", "--remote", LONG],
        ["show", "good.jsonl", "--kind", LONG],
        ["add", "good.jsonl", "--kind", "fact", "--text", "t", "--supersedes", LONG],
        [LONG],
    ],
    ids=lambda argv: " ".join(a[:8] for a in argv),
)
def test_a_long_id_is_echoed_as_a_short_prefix(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A 10 kB id or name came back whole in the error line."""
    (workdir / "config.toml").write_text(
        f'[[memory]]\nname = "me"\npath = "{workdir / "good.jsonl"}"\n', encoding="utf-8"
    )
    status, err = _cli(capsys, *argv)
    assert status == 2
    assert f"'{LONG[:40]}…'" in err
    assert len(err) < 400, err


def test_a_long_name_in_the_config_is_echoed_as_a_short_prefix(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = workdir / "config.toml"
    config.write_text(
        f'replica = "{LONG}"\n[[memory]]\nname = "{LONG}"\npath = "{workdir / "good.jsonl"}"\n'
        f'remotes = ["{LONG}"]\n',
        encoding="utf-8",
    )
    status, err = _cli(capsys, "check-config", "--config", config)
    assert status == 2
    assert f"'{LONG[:40]}…'" in err
    assert len(err) < 400, err


def test_shown_quotes_and_cuts() -> None:
    assert shown("abc") == "'abc'"
    assert shown("x" * 41) == repr("x" * 40 + "…")
    assert shown("a\x1bb") == "'a\\x1bb'"


# --- a full disk (issue 13, item 21: "[Errno 28] No space left on device" named no file) -----


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled by the test with `fill`; skipped where mounting is not
    allowed (not root, or a container without CAP_SYS_ADMIN)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(folder: Path) -> None:
    """Take every free block of `folder`'s file system."""
    fd = os.open(folder / "padding", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)


def test_a_full_disk_names_the_file_compaction_writes(
    full_disk: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = full_disk / "m.jsonl"
    versions = [  # 200 versions of 10 ids: compaction keeps the newest of each
        f'{{"id": "{n % 10:012x}", "created_at": "2026-11-01T00:{n // 60:02d}:{n % 60:02d}Z", '
        f'"kind": "fact", "text": "Version {n}."}}\n'
        for n in range(200)
    ]
    path.write_text('{"format": "agent-memory/0.1"}\n' + "".join(versions), encoding="utf-8")
    before = path.read_bytes()
    fill(full_disk)
    status, err = _cli(capsys, "compact", path, "--quiet-seconds", "0")
    assert status == 2
    assert err.startswith(f"memsync: {path}: no space left on device"), err
    assert path.read_bytes() == before
    assert sorted(p.name for p in full_disk.iterdir()) == ["m.jsonl", "m.jsonl.lock", "padding"]


def test_a_full_disk_names_the_new_memory_file(
    full_disk: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(full_disk)
    status, err = _cli(capsys, "add", full_disk / "new.jsonl", "--kind", "fact", "--text", "x")
    assert status == 2
    assert err.startswith(f"memsync: {full_disk / 'new.jsonl'}: no space left on device"), err
    assert not (full_disk / "new.jsonl").exists()


def test_a_full_state_directory_names_the_index(
    full_disk: Path,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite's "database or disk is full" was a traceback. A merge, which needs its
    index, stops and names it; recall, whose index is only a cache, answers by the plain
    scan and names it in one warning."""
    monkeypatch.setenv("XDG_STATE_HOME", str(full_disk))
    (full_disk / "memsync").mkdir(mode=0o700)
    fill(full_disk)
    index = rf"{re.escape(str(full_disk))}/memsync/\w+/[^ ]+\.sqlite"
    status, err = _cli(capsys, "merge", "good.jsonl", "--into", "dest.jsonl")
    assert status == 2
    assert re.match(rf"memsync: {index}: no space left on device", err)
    status, err = _cli(capsys, "recall", "good.jsonl", "fact")
    assert status == 0
    assert re.search(rf"recall without its full-text index: {index}: no space left", err), err


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "good.jsonl/new.jsonl", "--kind", "fact", "--text", "x"],
        ["merge", "good.jsonl", "--into", "good.jsonl/new.jsonl"],
        ["handoff", "good.jsonl", "good.jsonl/new.jsonl"],
        ["mcp", "good.jsonl/new.jsonl"],
    ],
    ids=" ".join,
)
def test_a_file_where_a_folder_belongs_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A memory path under a file said "<file>: file exists" (making its folder)."""
    status, err = _cli(capsys, *argv)
    assert status == 2
    assert re.fullmatch(r"memsync: (\S*/)?good\.jsonl(/new\.jsonl)?: not a directory", err), err
