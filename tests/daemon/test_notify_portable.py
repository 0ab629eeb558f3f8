"""sd_notify without `socket.SOCK_CLOEXEC`, as on macOS (issue 23): no AttributeError,
the message still goes, and the socket is still not inherited by children."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest

from memsync.daemon._systemd import notify


def test_notify_works_where_the_platform_has_no_sock_cloexec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # a short AF_UNIX path
        address = str(Path(folder) / "n.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
            receiver.bind(address)
            receiver.settimeout(5)
            monkeypatch.delattr(socket, "SOCK_CLOEXEC", raising=False)
            assert notify("READY=1", env={"NOTIFY_SOCKET": address}) is True
            assert receiver.recv(100) == b"READY=1"


def test_python_sockets_are_not_inherited() -> None:
    """What SOCK_CLOEXEC added: Python's sockets are non-inheritable already (PEP 446)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        assert not sock.get_inheritable()
