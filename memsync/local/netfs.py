"""Detect memory files on network filesystems, where `O_APPEND` and file locks are unreliable
(NFS emulates `O_APPEND` on the client; SMB and sshfs may not honour `flock`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["NETWORK_FS_TYPES", "filesystem_type", "warn_if_network_fs"]

logger = logging.getLogger(__name__)

NETWORK_FS_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs",
        "lustre", "gpfs", "9p", "davfs", "fuse.sshfs", "fuse.rclone", "fuse.s3fs",
        "fuse.gcsfuse", "fuse.glusterfs", "fuse.cephfs",
    }
)  # fmt: skip

_warned: set[str] = set()


def filesystem_type(path: Path, mounts_file: Path = Path("/proc/self/mounts")) -> str | None:
    """The type of the filesystem holding `path` (Linux /proc/self/mounts), or None."""
    try:
        target = os.path.realpath(path if path.exists() else path.parent)
        table = mounts_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    best, best_type = "", None
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, fields[2]
    return best_type


def warn_if_network_fs(path: Path) -> bool:
    """Log a warning, once per file and process, when `path` is on a network filesystem."""
    fstype = filesystem_type(path)
    if fstype not in NETWORK_FS_TYPES:
        return False
    key = str(path)
    if key not in _warned:
        _warned.add(key)
        logger.warning(
            "%s is on a network filesystem (%s): O_APPEND and file locks are unreliable "
            "there; keep memory files local and sync them through a memsync hub instead",
            path,
            fstype,
        )
    return True
