"""Platform differences on the storage side (issue 23, item 4): F_FULLFSYNC where the
platform has it, network filesystems in macOS's `mount` output, and no SQLite write-ahead
log for a state directory on a network filesystem.

F_FULLFSYNC exists only on macOS: here the platform's `fcntl` is given one (a recorder
standing in for the kernel), and the real compaction and atomic replace must go through
it; on Linux itself `full_fsync` is a plain fsync."""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
from pathlib import Path

import pytest

from memsync.hub.transports.localdir import LocalDirTransport
from memsync.local import netfs
from memsync.local.compaction import compact_file
from memsync.local.fresh import header_line
from memsync.local.sqlitedb import connect
from memsync.local.storage import atomic_replace, full_fsync
from tests.helpers.records import T0, entry

F_FULLFSYNC = 51  # macOS's value


class _Kernel:
    """fcntl as on macOS: F_FULLFSYNC flushes (counted), or fails as on a network mount."""

    def __init__(self, fail: bool = False) -> None:
        self.full = 0
        self.fail = fail

    def __call__(self, fd: int, cmd: int, *args: object) -> int:
        assert cmd == F_FULLFSYNC
        os.fstat(fd)  # a real, open descriptor
        if self.fail:
            raise OSError(errno.ENOTSUP, "Operation not supported")
        self.full += 1
        return 0


@pytest.fixture
def macos_fcntl(monkeypatch: pytest.MonkeyPatch) -> _Kernel:
    kernel = _Kernel()
    monkeypatch.setattr(fcntl, "F_FULLFSYNC", F_FULLFSYNC, raising=False)
    monkeypatch.setattr(fcntl, "fcntl", kernel)
    return kernel


@pytest.mark.linux_only
def test_full_fsync_on_linux_is_fsync(tmp_path: Path) -> None:
    assert not hasattr(fcntl, "F_FULLFSYNC")
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"x")
        full_fsync(fd)
    finally:
        os.close(fd)


def test_atomic_replace_and_compaction_use_f_fullfsync(
    tmp_path: Path, macos_fcntl: _Kernel
) -> None:
    atomic_replace(tmp_path / "status.json", b"{}")
    assert macos_fcntl.full == 2  # the temp file, then its folder
    path = tmp_path / "m.jsonl"
    path.write_bytes(header_line(T0) + entry("a", 1) + b"\n" + entry("a", 2) + b"\n")
    before = macos_fcntl.full
    assert compact_file(path, now=T0, quiet_seconds=0, grace_seconds=0).rewritten
    assert macos_fcntl.full >= before + 2  # the compacted copy, then its folder


def test_hub_writes_use_f_fullfsync(tmp_path: Path, macos_fcntl: _Kernel) -> None:
    (tmp_path / "hub").mkdir(mode=0o700)
    hub = LocalDirTransport(tmp_path / "hub")
    hub.write_at("notes", "me.jsonl", 0, b"line\n")
    after_write = macos_fcntl.full
    assert after_write >= 2  # the file, and the folder that got a new name
    hub.replace("notes", "me.jsonl", b"other\n")
    assert macos_fcntl.full >= after_write + 2


def test_a_mount_refusing_f_fullfsync_gets_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _Kernel(fail=True)
    monkeypatch.setattr(fcntl, "F_FULLFSYNC", F_FULLFSYNC, raising=False)
    monkeypatch.setattr(fcntl, "fcntl", kernel)
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        full_fsync(fd)
    finally:
        os.close(fd)
    assert synced == [fd]


MACOS_MOUNT = """\
/dev/disk3s1s1 on / (apfs, sealed, local, read-only, journaled)
devfs on /dev (devfs, local, nobrowse)
/dev/disk3s5 on /System/Volumes/Data (apfs, local, journaled, nobrowse, protect)
//me@nas._smb._tcp.local/Home on /Volumes/Home (smbfs, nodev, nosuid, mounted by me)
afp_0Tq3 on /Volumes/Old Share (afpfs, nodev, nosuid, mounted by me)
https://dav.example.org/remote.php/dav on /Volumes/dav.example.org (webdav, nodev, noexec, nosuid, mounted by me)
me@server:/home/me on /Users/me/server (macfuse, nodev, nosuid, synchronous, mounted by me)
/dev/disk4s1 on /Volumes/USB STICK (exfat, local, nodev, nosuid, noowners, mounted by me)
"""


def test_macos_mount_output_is_read() -> None:
    table = dict(netfs.parse_bsd_mount(MACOS_MOUNT))
    assert table["/Volumes/Home"] == "smbfs"
    assert table["/Volumes/Old Share"] == "afpfs"
    assert table["/Volumes/dav.example.org"] == "webdav"
    assert table["/Users/me/server"] == "macfuse"
    assert table["/Volumes/USB STICK"] == "exfat"
    assert table["/System/Volumes/Data"] == "apfs"
    for mount in ("/Volumes/Home", "/Volumes/Old Share", "/Volumes/dav.example.org"):
        assert table[mount] in netfs.NETWORK_FS_TYPES
    assert "macfuse" in netfs.NETWORK_FS_TYPES
    assert "apfs" not in netfs.NETWORK_FS_TYPES


def test_without_proc_the_mount_command_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No /proc/self/mounts (macOS): `mount` answers, here a stand-in printing macOS's."""
    share = tmp_path / "Volumes" / "Home"
    share.mkdir(parents=True)
    fake = tmp_path / "bin" / "mount"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\nprintf '%s\\n' '/dev/disk3s1s1 on / (apfs, local)' "
        f"'//me@nas/Home on {share} (smbfs, nodev, nosuid, mounted by me)'\n"
    )
    fake.chmod(0o700)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setattr(netfs, "MOUNTS", tmp_path / "no-proc" / "mounts")
    assert netfs.filesystem_type(share / "me.jsonl") == "smbfs"
    assert netfs.on_network_fs(share / "me.jsonl")
    assert netfs.filesystem_type(tmp_path / "local.jsonl") == "apfs"


def _journal_mode(db: sqlite3.Connection) -> str:
    row = db.execute("PRAGMA journal_mode").fetchone()
    return str(row[0])


def test_no_write_ahead_log_for_a_state_dir_on_a_network_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nas = tmp_path / "nas"
    nas.mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/sda1 / ext4 rw 0 0\nserver:/home {nas} nfs4 rw 0 0\n", encoding="utf-8"
    )
    monkeypatch.setattr(netfs, "MOUNTS", mounts)
    local = connect(tmp_path / "state" / "x.db")
    remote = connect(nas / "state" / "x.db")
    try:
        assert _journal_mode(local) == "wal"
        assert _journal_mode(remote) == "delete"
        remote.execute("CREATE TABLE t (x)")
        remote.execute("INSERT INTO t VALUES (1)")
        assert not (nas / "state" / "x.db-wal").exists()
    finally:
        local.close()
        remote.close()
