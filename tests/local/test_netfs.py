"""The network-filesystem warning: memory files on NFS, SMB or sshfs get one warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memsync.local import netfs


def _mounts(tmp_path: Path, fstype: str, mount: Path) -> Path:
    table = tmp_path / "mounts"
    table.write_text(
        f"/dev/sda1 / ext4 rw,relatime 0 0\nserver:/export {mount} {fstype} rw,relatime 0 0\n",
        encoding="utf-8",
    )
    return table


@pytest.mark.parametrize("fstype", ["nfs4", "cifs", "fuse.sshfs"])
def test_the_filesystem_type_is_that_of_the_longest_mount_above(
    tmp_path: Path, fstype: str
) -> None:
    mount = tmp_path / "share"
    (mount / "agent").mkdir(parents=True)
    table = _mounts(tmp_path, fstype, mount)
    assert netfs.filesystem_type(mount / "agent" / "m.jsonl", table) == fstype
    assert netfs.filesystem_type(tmp_path / "elsewhere.jsonl", table) == "ext4"


def test_a_file_on_a_network_filesystem_is_warned_about_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    mount = tmp_path / "nas"
    mount.mkdir()
    table = _mounts(tmp_path, "nfs", mount)
    real = netfs.filesystem_type
    monkeypatch.setattr(netfs, "filesystem_type", lambda path: real(path, table))
    path = mount / "me.jsonl"
    with caplog.at_level(logging.WARNING, logger="memsync.local.netfs"):
        assert netfs.warn_if_network_fs(path)
        assert netfs.warn_if_network_fs(path)
    warnings = [r for r in caplog.records if "network filesystem" in r.getMessage()]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage()


def test_a_local_file_is_not_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = _mounts(tmp_path, "nfs", tmp_path / "nas")
    assert netfs.filesystem_type(tmp_path / "m.jsonl", table) == "ext4"
    with caplog.at_level(logging.WARNING, logger="memsync.local.netfs"):
        assert not netfs.warn_if_network_fs(tmp_path / "local.jsonl")
    assert not caplog.records
