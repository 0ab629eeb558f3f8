"""Writer detection (issue 23, item 1): each detector that can run on Linux finds a real
process holding a file open for appending, not one holding it for reading, and says
"cannot tell" (None) rather than "nobody" when it cannot look. libproc (macOS) could not
run here: its structures are checked against `<sys/proc_info.h>`'s sizes and offsets,
and its decoding on bytes laid out as the kernel lays them out."""

from __future__ import annotations

import ctypes
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memsync.local import writers
from memsync.local.writers import find_writers, libproc, lsof, procfs
from tests.helpers.writers import LINUX_DETECTORS, blind, only

OPENER = """
import sys
with open(sys.argv[1], sys.argv[2]) as f:
    print("open", flush=True)
    sys.stdin.readline()
"""


@contextmanager
def _opened(path: Path, mode: str) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", OPENER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        assert proc.stdout.readline() == "open\n"
        try:
            yield proc
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)


@pytest.mark.parametrize("name", LINUX_DETECTORS)
def test_each_detector_finds_an_appender_and_not_a_reader(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only(monkeypatch, name)
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"")
    st = path.stat()
    assert find_writers(st.st_dev, st.st_ino) == []
    with _opened(path, "r"):
        assert find_writers(st.st_dev, st.st_ino) == []
    with _opened(path, "a") as holder:
        [found] = find_writers(st.st_dev, st.st_ino) or []
        assert found.pid == holder.pid
        assert found.name.startswith("python")
    with _opened(path, "r+"):
        assert len(find_writers(st.st_dev, st.st_ino) or []) == 1
    assert find_writers(st.st_dev, st.st_ino) == []


def test_our_own_handle_is_not_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with open(path, "a"):
        st = path.stat()
        for detector in writers.DETECTORS:
            if detector.available():
                assert detector.writers(st.st_dev, st.st_ino) == [], detector.name


@pytest.mark.linux_only
def test_proc_is_looked_up_at_each_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Monkeypatching `procfs.PROC` changes what the detector reads (it used to be bound
    at definition and did nothing)."""
    assert procfs.available()
    monkeypatch.setattr(procfs, "PROC", tmp_path / "no-proc")
    assert not procfs.available()
    assert procfs.writers(0, 0) is None


def test_no_detector_that_can_tell_is_cannot_tell_not_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"")
    st = path.stat()
    blind(monkeypatch, tmp_path)
    with _opened(path, "a"):
        assert find_writers(st.st_dev, st.st_ino) is None
    monkeypatch.setattr(writers, "DETECTORS", ())
    assert find_writers(st.st_dev, st.st_ino) is None


def test_a_failing_detector_falls_through_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/proc gone, lsof still there: lsof answers."""
    only(monkeypatch, "lsof")
    monkeypatch.setattr(procfs, "PROC", tmp_path / "no-proc")
    monkeypatch.setattr(writers, "DETECTORS", (procfs.ProcFs(), *writers.DETECTORS))
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"")
    st = path.stat()
    with _opened(path, "a") as holder:
        assert [w.pid for w in find_writers(st.st_dev, st.st_ino) or []] == [holder.pid]


def test_an_lsof_that_fails_cannot_tell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "lsof"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'lsof: WARNING: cannot read' >&2\nexit 1\n")
    fake.chmod(0o700)
    monkeypatch.setenv("PATH", str(fake.parent))
    assert lsof.Lsof().writers(1, 2) is None


LSOF_OUTPUT = b"".join(
    line + b"\n"
    for line in (
        b"p100",
        b"cagent",
        b"fcwd",
        b"a ",
        b"D0xfe00",
        b"i7",
        b"f3",
        b"ar",
        b"D0xfe00",
        b"i42",
        b"f4",
        b"aw",
        b"D0xfe00",
        b"i42",
        b"p200",
        b"cother",
        b"f5",
        b"au",
        b"D0xfe00",
        b"i42",
        b"f6",
        b"aw",
        b"D0xfe01",
        b"i42",
        b"p300",
        b"cself",
        b"f7",
        b"aw",
        b"D0xfe00",
        b"i42",
    )
)


def test_lsof_output_is_read_by_device_inode_and_access() -> None:
    found = lsof.parse(LSOF_OUTPUT, 0xFE00, 42, own=300)
    assert [(w.pid, w.name, w.fd) for w in found or []] == [(100, "agent", 4), (200, "other", 5)]
    assert lsof.parse(LSOF_OUTPUT, 0xFE00, 43, own=300) == []
    assert lsof.parse(b"not lsof\n", 1, 2, own=3) is None
    assert lsof.parse(b"pabc\n", 1, 2, own=3) is None


# libproc: what can be checked without a Mac


def test_libproc_structures_have_the_header_sizes_and_offsets() -> None:
    """`<sys/proc_info.h>`: PROC_PIDLISTFD_SIZE is 8, PROC_PIDFDVNODEPATHINFO_SIZE 1200;
    `vst_ino` is 8 bytes into `vinfo_stat`, which starts 24 bytes in (after
    `proc_fileinfo`); the path is after the 152-byte `vnode_info`."""
    assert ctypes.sizeof(libproc.ProcFdInfo) == 8
    assert ctypes.sizeof(libproc.ProcFileInfo) == 24
    assert ctypes.sizeof(libproc.VinfoStat) == 136
    assert ctypes.sizeof(libproc.VnodeInfo) == 152
    assert ctypes.sizeof(libproc.VnodeFdInfoWithPath) == 1200
    info = libproc.VnodeFdInfoWithPath
    assert info.pvip.offset == 24
    assert libproc.VnodeInfoPath.vip_path.offset == 152
    assert libproc.VinfoStat.vst_ino.offset == 8


def _vnode_bytes(openflags: int, dev: int, ino: int) -> bytes:
    """A `vnode_fdinfowithpath` as the kernel fills it (little-endian, as on arm64 and
    x86_64), packed by hand from the header's layout."""
    fileinfo = struct.pack("<IIqiI", openflags, 0, 0, 1, 0)
    vstat = struct.pack(
        "<IHHQII8qqqiIII2q", dev, 0o100600, 1, ino, 501, 20, *[0] * 8, 0, 0, 0, 0, 0, 0, 0, 0
    )
    vinfo = vstat + struct.pack("<ii2i", 1, 0, 0, 0)
    return fileinfo + vinfo + b"/Users/me/m.jsonl".ljust(1024, b"\0")


def test_libproc_decoding_matches_device_inode_and_the_write_flag() -> None:
    fread = 0x1
    for flags, dev, ino, expected in (
        (fread | libproc.FWRITE, 0x1000010, 42, True),
        (libproc.FWRITE, 0x1000010, 42, True),
        (fread, 0x1000010, 42, False),
        (fread | libproc.FWRITE, 0x1000011, 42, False),
        (fread | libproc.FWRITE, 0x1000010, 43, False),
    ):
        raw = _vnode_bytes(flags, dev, ino)
        assert len(raw) == ctypes.sizeof(libproc.VnodeFdInfoWithPath)
        info = libproc.VnodeFdInfoWithPath.from_buffer_copy(raw)
        assert libproc.is_writer_of(info, 0x1000010, 42) is expected
        assert info.pvip.vip_path == b"/Users/me/m.jsonl"


def test_libproc_lists_only_vnode_descriptors() -> None:
    raw = struct.pack("<iIiIiI", 0, 1, 3, 2, 4, 1)  # fd 0 vnode, fd 3 socket, fd 4 vnode
    buffer = (libproc.ProcFdInfo * 3).from_buffer_copy(raw)
    assert libproc.decode_fds(buffer, len(raw)) == [0, 4]
    assert libproc.decode_fds(buffer, 8) == [0]


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_libproc_is_not_available_off_macos() -> None:
    assert not libproc.LibProc().available()
    assert libproc.LibProc().writers(1, 2) is None


class _Broken:
    """A detector that fails as a C call can (libproc returning what ctypes refuses)."""

    name = "broken"

    def available(self) -> bool:
        return True

    def writers(self, dev: int, ino: int) -> list[writers.Writer] | None:
        raise ctypes.ArgumentError("argument 4: wrong type")


@pytest.mark.linux_only
def test_a_detector_that_breaks_cannot_tell_and_the_next_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"")
    st = path.stat()
    monkeypatch.setattr(writers, "DETECTORS", (_Broken(),))
    assert find_writers(st.st_dev, st.st_ino) is None
    monkeypatch.setattr(writers, "DETECTORS", (_Broken(), procfs.ProcFs()))
    with _opened(path, "a") as holder:
        assert [w.pid for w in find_writers(st.st_dev, st.st_ino) or []] == [holder.pid]
