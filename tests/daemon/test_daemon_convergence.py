"""Real daemons say whether their machines agree (issue 21): the status file's convergence
and systemd's STATUS= line read "in sync with N machine(s)" once receipts have gone round."""

from __future__ import annotations

import contextlib
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.daemons import Cluster, cli_add, start_all, view_ids, wait_for


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="AF_UNIX datagrams on Linux")
def test_two_daemons_say_they_are_in_sync(cluster: Cluster) -> None:
    hub = cluster.hub()
    a, b = cluster.folder_node("a", hub), cluster.folder_node("b", hub)
    with tempfile.TemporaryDirectory() as short:  # sun_path holds 108 bytes: tmp_path may not
        address = str(Path(short) / "notify.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(address)
            sock.settimeout(0.2)
            a.env["NOTIFY_SOCKET"] = address
            start_all(a, b)
            on_a = cli_add(a.memory, "the build uses uv")
            wait_for(lambda: on_a in view_ids(b.memory), "a's add in b's view")

            def in_sync() -> bool:
                status = a.status()
                remote = None if status is None else status.memories["m"].remotes.get("hub")
                return remote is not None and remote.in_sync is True

            wait_for(in_sync, "a's status to say it is in sync", timeout=30)
            status = a.status()
            assert status is not None
            assert status.memories["m"].remotes["hub"].convergence == "in sync with 1 machine(s)"
            lines: list[str] = []

            def said() -> bool:
                with contextlib.suppress(TimeoutError):
                    lines.append(sock.recv(4096).decode())
                return "STATUS=m <-> hub: in sync with 1 machine(s)" in lines

            wait_for(said, "STATUS= saying in sync", timeout=10)
    assert a.stop() == 0
    assert b.stop() == 0
