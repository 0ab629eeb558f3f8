"""Which processes hold a file open for writing, asked of macOS's libproc through ctypes.

`proc_listpids(PROC_ALL_PIDS)` lists the processes, `proc_pidinfo(PROC_PIDLISTFDS)` the
descriptors of each, and `proc_pidfdinfo(PROC_PIDFDVNODEPATHINFO)` the file behind a
vnode descriptor: its device and inode (`vst_dev`, `vst_ino`) and how it was opened
(`fi_openflags`, the kernel's `FREAD`/`FWRITE` bits). The structures below follow
`<sys/proc_info.h>`; their sizes are checked against the header's in the tests. Processes
we may not look at (other users', without root) are skipped, as under `/proc`.

Could not be run where memsync is tested (Linux); the layout and the decoding are tested
there, the calls only on a Mac.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import cache

from memsync.local.writers.base import Writer

__all__ = [
    "FWRITE",
    "LibProc",
    "ProcFdInfo",
    "ProcFileInfo",
    "VinfoStat",
    "VnodeFdInfoWithPath",
    "VnodeInfo",
    "VnodeInfoPath",
    "decode_fds",
    "is_writer_of",
]

PROC_ALL_PIDS = 1
PROC_PIDLISTFDS = 1
PROC_PIDFDVNODEPATHINFO = 2
PROX_FDTYPE_VNODE = 1
FWRITE = 0x2
_MAXPATHLEN = 1024
_MAXCOMLEN = 16


class ProcFdInfo(ctypes.Structure):
    """`struct proc_fdinfo`: one descriptor of a process."""

    _fields_ = (("proc_fd", ctypes.c_int32), ("proc_fdtype", ctypes.c_uint32))


class ProcFileInfo(ctypes.Structure):
    """`struct proc_fileinfo`."""

    _fields_ = (
        ("fi_openflags", ctypes.c_uint32),
        ("fi_status", ctypes.c_uint32),
        ("fi_offset", ctypes.c_int64),
        ("fi_type", ctypes.c_int32),
        ("fi_guardflags", ctypes.c_uint32),
    )


class VinfoStat(ctypes.Structure):
    """`struct vinfo_stat`."""

    _fields_ = (
        ("vst_dev", ctypes.c_uint32),
        ("vst_mode", ctypes.c_uint16),
        ("vst_nlink", ctypes.c_uint16),
        ("vst_ino", ctypes.c_uint64),
        ("vst_uid", ctypes.c_uint32),
        ("vst_gid", ctypes.c_uint32),
        ("vst_times", ctypes.c_int64 * 8),  # a, m, c and birth time, each with its ns
        ("vst_size", ctypes.c_int64),
        ("vst_blocks", ctypes.c_int64),
        ("vst_blksize", ctypes.c_int32),
        ("vst_flags", ctypes.c_uint32),
        ("vst_gen", ctypes.c_uint32),
        ("vst_rdev", ctypes.c_uint32),
        ("vst_qspare", ctypes.c_int64 * 2),
    )


class VnodeInfo(ctypes.Structure):
    """`struct vnode_info`."""

    _fields_ = (
        ("vi_stat", VinfoStat),
        ("vi_type", ctypes.c_int),
        ("vi_pad", ctypes.c_int),
        ("vi_fsid", ctypes.c_int32 * 2),
    )


class VnodeInfoPath(ctypes.Structure):
    """`struct vnode_info_path`."""

    _fields_ = (("vip_vi", VnodeInfo), ("vip_path", ctypes.c_char * _MAXPATHLEN))


class VnodeFdInfoWithPath(ctypes.Structure):
    """`struct vnode_fdinfowithpath`, what PROC_PIDFDVNODEPATHINFO fills."""

    _fields_ = (("pfi", ProcFileInfo), ("pvip", VnodeInfoPath))


def decode_fds(buffer: ctypes.Array[ProcFdInfo], size: int) -> list[int]:
    """The vnode descriptors among the first `size` bytes PROC_PIDLISTFDS filled."""
    count = size // ctypes.sizeof(ProcFdInfo)
    return [buffer[i].proc_fd for i in range(count) if buffer[i].proc_fdtype == PROX_FDTYPE_VNODE]


def is_writer_of(info: VnodeFdInfoWithPath, dev: int, ino: int) -> bool:
    """Whether the descriptor described by `info` is the file (`dev`, `ino`), open for
    writing. `vst_dev` is a 32-bit `dev_t`, as `st_dev` is on macOS."""
    st = info.pvip.vip_vi.vi_stat
    same = st.vst_ino == ino and st.vst_dev == (dev & 0xFFFFFFFF)
    return same and bool(info.pfi.fi_openflags & FWRITE)


class LibProc:
    """The libproc detector (macOS)."""

    name = "libproc"

    def available(self) -> bool:
        return _lib() is not None

    def writers(self, dev: int, ino: int) -> list[Writer] | None:
        lib = _lib()
        if lib is None:
            return None
        pids = _pids(lib)
        if pids is None:
            return None
        own = os.getpid()
        found: list[Writer] = []
        info = VnodeFdInfoWithPath()
        for pid in pids:
            if pid in (0, own):
                continue
            fds = _vnode_fds(lib, pid)
            if fds is None:
                return None  # its descriptors could not be listed whole: cannot tell
            for fd in fds:
                got = lib.proc_pidfdinfo(
                    pid, fd, PROC_PIDFDVNODEPATHINFO, ctypes.byref(info), ctypes.sizeof(info)
                )
                if got == ctypes.sizeof(info) and is_writer_of(info, dev, ino):
                    found.append(Writer(pid, _name(lib, pid), fd))
        return found


@cache
def _lib() -> ctypes.CDLL | None:
    if sys.platform != "darwin":
        return None
    try:
        lib = ctypes.CDLL("/usr/lib/libproc.dylib", use_errno=True)
    except OSError:
        try:
            lib = ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True)
        except OSError:
            return None
    for fn in ("proc_listpids", "proc_pidinfo", "proc_pidfdinfo", "proc_name"):
        if not hasattr(lib, fn):
            return None
    lib.proc_listpids.argtypes = (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int)
    lib.proc_pidinfo.argtypes = (
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_int,
    )
    lib.proc_pidfdinfo.argtypes = (
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int,
    )
    lib.proc_name.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32)
    return lib


def _pids(lib: ctypes.CDLL) -> list[int] | None:
    """Every pid, or None when libproc will not list them."""
    for _ in range(3):  # processes come and go between the two calls
        size = lib.proc_listpids(PROC_ALL_PIDS, 0, None, 0)
        if size <= 0:
            return None
        count = size // ctypes.sizeof(ctypes.c_int) + 64
        buffer = (ctypes.c_int * count)()
        got = lib.proc_listpids(PROC_ALL_PIDS, 0, buffer, ctypes.sizeof(buffer))
        if got <= 0:
            return None
        if got < ctypes.sizeof(buffer):
            return [p for p in buffer[: got // ctypes.sizeof(ctypes.c_int)] if p > 0]
    return None


def _vnode_fds(lib: ctypes.CDLL, pid: int) -> list[int] | None:
    """The vnode descriptors of `pid`; none for a process we may not look at or that is
    gone; None when the list kept filling the whole buffer (it may have been cut short:
    the process opens descriptors faster than they are listed), which is "cannot tell"."""
    for _ in range(3):
        size = lib.proc_pidinfo(pid, PROC_PIDLISTFDS, 0, None, 0)
        if size <= 0:
            return []
        count = size // ctypes.sizeof(ProcFdInfo) + 32
        buffer = (ProcFdInfo * count)()
        got = lib.proc_pidinfo(pid, PROC_PIDLISTFDS, 0, buffer, ctypes.sizeof(buffer))
        if got <= 0:
            return []
        if got < ctypes.sizeof(buffer):
            return decode_fds(buffer, got)
    return None


def _name(lib: ctypes.CDLL, pid: int) -> str:
    buffer = ctypes.create_string_buffer(4 * _MAXCOMLEN + 1)
    if lib.proc_name(pid, buffer, ctypes.sizeof(buffer)) <= 0:
        return "?"
    return buffer.value.decode("utf-8", errors="replace")
