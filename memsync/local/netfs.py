"""Detect files on network filesystems, where `O_APPEND` and file locks are unreliable
(NFS emulates `O_APPEND` on the client; SMB and sshfs may not honour `flock`), and where
SQLite's write-ahead log cannot work (it needs shared memory beside the database).

The mount table is Linux's `/proc/self/mounts` (`MOUNTS`, looked up at each call); where
there is none (macOS, the BSDs) it is the output of `mount`, whose lines read
`//me@nas/share on /Volumes/share (smbfs, nodev, nosuid, mounted by me)`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "MOUNTS",
    "NETWORK_FS_TYPES",
    "filesystem_type",
    "on_network_fs",
    "parse_bsd_mount",
    "warn_if_network_fs",
]

MOUNTS = Path("/proc/self/mounts")

NETWORK_FS_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs",
        "lustre", "gpfs", "9p", "davfs", "fuse.sshfs", "fuse.rclone", "fuse.s3fs",
        "fuse.gcsfuse", "fuse.glusterfs", "fuse.cephfs",
        # macOS: SMB, AFP, WebDAV (iDisk, Nextcloud), macFUSE (sshfs and the like)
        "afpfs", "webdav", "macfuse", "osxfuse", "osxfusefs", "fusefs",
    }
)  # fmt: skip

_warned: set[str] = set()

_BSD_LINE = re.compile(r"(?P<dev>.*?) on (?P<mount>/.*) \((?P<type>[^,)]+)")


def parse_bsd_mount(output: str) -> list[tuple[str, str]]:
    """(mount point, type) of each line of macOS's or a BSD's `mount` output."""
    out = []
    for line in output.splitlines():
        m = _BSD_LINE.match(line)
        if m is not None:
            out.append((m.group("mount"), m.group("type").strip()))
    return out


def _linux_table(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            out.append((fields[1].replace("\\040", " "), fields[2]))
    return out


def _mount_table(mounts_file: Path | None) -> list[tuple[str, str]] | None:
    try:
        return _linux_table((mounts_file or MOUNTS).read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        pass  # no /proc: ask `mount`
    except OSError:
        return None
    import subprocess  # no /proc (macOS): rare, and start-up time for every write (issue 20)

    try:
        done = subprocess.run(["mount"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_bsd_mount(done.stdout) if done.returncode == 0 else None


def filesystem_type(path: Path, mounts_file: Path | None = None) -> str | None:
    """The type of the filesystem holding `path` (the longest mount point above it), or
    None when no mount table can be read."""
    try:
        target = os.path.realpath(path if path.exists() else path.parent)
    except OSError:
        return None
    table = _mount_table(mounts_file)
    if table is None:
        return None
    best, best_type = "", None
    for mount, fstype in table:
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, fstype
    return best_type


def on_network_fs(path: Path) -> bool:
    """Whether `path` (or, if it does not exist, its folder) is on a network filesystem."""
    return filesystem_type(path) in NETWORK_FS_TYPES


def warn_if_network_fs(path: Path) -> bool:
    """Log a warning, once per file and process, when `path` is on a network filesystem."""
    fstype = filesystem_type(path)
    if fstype not in NETWORK_FS_TYPES:
        return False
    key = str(path)
    if key not in _warned:
        _warned.add(key)
        from memsync.local.logs import get_logger  # `logging` only to warn (issue 20)

        get_logger(__name__).warning(
            "%s is on a network filesystem (%s): O_APPEND and file locks are unreliable "
            "there; keep memory files local and sync them through a memsync hub instead",
            path,
            fstype,
        )
    return True
