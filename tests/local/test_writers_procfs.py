"""The `/proc` detector (issue 23, item 1) on a /proc that shows a process holding the
file but not how it opened it (no fdinfo: WSL1, gVisor, a restricted /proc): that is
"cannot tell", never "nobody"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.local.writers import procfs


def _fake_proc(tmp_path: Path, target: Path, *, fdinfo: str | None) -> Path:
    proc = tmp_path / "proc"
    (proc / "self" / "fd").mkdir(parents=True)
    pid = proc / str(os.getpid() + 100_000)
    (pid / "fd").mkdir(parents=True)
    (pid / "fd" / "3").symlink_to(target)
    (pid / "comm").write_text("agent\n")
    if fdinfo is not None:
        (pid / "fdinfo").mkdir()
        (pid / "fdinfo" / "3").write_text(fdinfo)
    return proc


def test_a_holder_whose_access_cannot_be_read_is_cannot_tell(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    target.write_bytes(b"")
    st = target.stat()
    proc = _fake_proc(tmp_path, target, fdinfo=None)
    assert procfs.writers(st.st_dev, st.st_ino, proc=proc) is None


@pytest.mark.parametrize(
    ("fdinfo", "writer"),
    [("pos:\t0\nflags:\t02102001\n", True), ("pos:\t0\nflags:\t0100000\n", False)],
)
def test_a_holder_is_told_by_its_fdinfo_flags(tmp_path: Path, fdinfo: str, writer: bool) -> None:
    target = tmp_path / "m.jsonl"
    target.write_bytes(b"")
    st = target.stat()
    proc = _fake_proc(tmp_path, target, fdinfo=fdinfo)
    found = procfs.writers(st.st_dev, st.st_ino, proc=proc)
    assert found is not None
    assert [w.name for w in found] == (["agent"] if writer else [])


def test_fdinfo_without_flags_is_cannot_tell(tmp_path: Path) -> None:
    target = tmp_path / "m.jsonl"
    target.write_bytes(b"")
    st = target.stat()
    proc = _fake_proc(tmp_path, target, fdinfo="pos:\t0\n")
    assert procfs.writers(st.st_dev, st.st_ino, proc=proc) is None
