"""libproc's list of a process's descriptors (issue 23, item 1), on a stand-in for the
library: a list that filled the whole buffer may have been cut short (the process opened
more meanwhile), so it is asked again, and never read as complete."""

from __future__ import annotations

import ctypes
from typing import Any

from memsync.local.writers import libproc


class _Lib:
    """`proc_pidinfo(PROC_PIDLISTFDS)` of a process that opens `grow` descriptors between
    the call that sizes the buffer and the call that fills it, `times` times."""

    def __init__(self, fds: int, grow: int, times: int) -> None:
        self.fds, self.grow, self.times = fds, grow, times

    def proc_pidinfo(self, pid: int, flavor: int, arg: int, buffer: Any, size: int) -> int:
        if buffer is None:
            return self.fds * ctypes.sizeof(libproc.ProcFdInfo)
        if self.times > 0:
            self.times -= 1
            self.fds += self.grow
        n = min(self.fds, size // ctypes.sizeof(libproc.ProcFdInfo))
        for i in range(n):
            buffer[i].proc_fd = i
            buffer[i].proc_fdtype = libproc.PROX_FDTYPE_VNODE
        return n * ctypes.sizeof(libproc.ProcFdInfo)


def test_a_list_that_fills_the_buffer_is_asked_again() -> None:
    lib = _Lib(fds=10, grow=100, times=1)
    assert libproc._vnode_fds(lib, 1) == list(range(110))  # type: ignore[arg-type]


def test_a_list_that_keeps_filling_the_buffer_cannot_tell() -> None:
    lib = _Lib(fds=10, grow=100, times=10)
    assert libproc._vnode_fds(lib, 1) is None  # type: ignore[arg-type]


def test_a_steady_list_is_read_whole() -> None:
    assert libproc._vnode_fds(_Lib(fds=7, grow=0, times=0), 1) == list(range(7))  # type: ignore[arg-type]
