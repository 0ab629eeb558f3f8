"""SSHTransport and a server that stops answering with the connection still open (issue 13,
item 15): every step is bounded, the error says so in one line; and a `replace` cut off
between writing its temp file and renaming it leaves no temp file behind for long.

The silence is real: a relay that stops relaying at a chosen point of the connection
(tests/hang_relay.py), or every sshd process stopped with SIGSTOP (a frozen host)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync.errors import TransportError, TransportTimeout
from memsync.hub.transports._ssh_session import TimedSFTPClient
from memsync.hub.transports.ssh import SSHTransport
from tests.helpers.hang_relay import FreezingRelay
from tests.helpers.sshd import SshdServer, _descendants, kill_sessions, start_sshd

pytestmark = pytest.mark.integration

FOLDER = "notes"
NAME = "laptop-1a2b.jsonl"
HANGS = "(the server or the network hangs)"


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshdServer]:
    server = start_sshd(tmp_path / "sshd")
    yield server
    try:
        for pid in [server.process.pid, *_descendants(server.process.pid)]:
            with contextlib.suppress(ProcessLookupError):  # a session that ended meanwhile
                os.kill(pid, signal.SIGCONT)
    finally:
        server.stop()


@pytest.fixture
def hub_root(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    root.mkdir()
    return root


def _transport(server: SshdServer, root: Path, port: int, **kwargs: Any) -> SSHTransport:
    return SSHTransport(
        server.host,
        str(root),
        port=port,
        user=server.user,
        identity_file=server.client_key,
        known_hosts=server.known_hosts,
        ssh_config_path=root.parent / "no-ssh-config",
        **kwargs,
    )


def _known_as(server: SshdServer, port: int) -> None:
    """Let the host key be known on `port` too (a relay in front of the server)."""
    line = server.known_hosts.read_text().splitlines()[0].split(" ", 1)[1]
    with server.known_hosts.open("a") as f:
        f.write(f"[127.0.0.1]:{port} {line}\n")


def _bounded(call: Callable[[], object], limit: float) -> tuple[object, float]:
    """Run `call` in a thread; its result or exception, and how long it took. Fails the
    test (instead of hanging it) when it has not returned within `limit` seconds."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 (handed to the test, which checks it)
            box.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    took = time.monotonic() - started
    assert not thread.is_alive(), f"still waiting after {limit:g} s: a wait with no bound"
    return box[0], took


def _freeze(server: SshdServer) -> None:
    """SIGSTOP the listener and every session process: TCP stays open, nothing answers."""
    for pid in [server.process.pid, *_descendants(server.process.pid)]:
        with contextlib.suppress(ProcessLookupError):  # a session that ended meanwhile
            os.kill(pid, signal.SIGSTOP)


def test_a_silence_at_any_step_of_the_connection_is_bounded(
    own_sshd: SshdServer, hub_root: Path
) -> None:
    """The relay goes silent after 0, 1, 2, ... chunks from the server: during the banner, the
    key exchange, authentication, the channel, the `sftp` subsystem request (which paramiko
    waits for with no timeout), the SFTP version exchange, the first request. Each attempt
    ends within the bound, with the one-line message, until one gets far enough to work."""
    timeout = 1.0
    outcomes: list[str] = []
    for chunks in range(40):
        relay = FreezingRelay(own_sshd.port, freeze_after=chunks)
        _known_as(own_sshd, relay.port)
        t = _transport(own_sshd, hub_root, relay.port, connect_timeout=timeout, io_timeout=timeout)
        try:
            result, took = _bounded(functools.partial(t.list_files, FOLDER), 3 * timeout + 5)
        finally:
            relay.close()
            t.close()
        if isinstance(result, list):
            break  # silent only after the call was answered
        assert isinstance(result, TransportTimeout), f"after {chunks} chunk(s): {result!r}"
        message = str(result)
        assert "\n" not in message
        assert message.endswith(HANGS), message
        assert "no SSH handshake within 1 s" in message or "no answer within 1 s" in message
        # The set-up's steps share one deadline; a first request has its own.
        assert took < 2 * timeout + 1.5, f"after {chunks} chunk(s): {took:.1f} s"
        outcomes.append(message.split(": ", 1)[1])
        print(f"silent after {chunks} chunk(s): {took:.2f} s: {message}")
    else:
        pytest.fail("never got an answer through the relay")
    assert len(outcomes) >= 5, outcomes  # banner, key exchange, auth, channel, subsystem...


@pytest.mark.parametrize("call", ["read", "write_at", "replace", "list_files"])
def test_a_frozen_host_fails_a_call_once_within_its_timeout(
    own_sshd: SshdServer, hub_root: Path, call: str
) -> None:
    """A call that opens a file (read, write, replace) used to wait the timeout a second time
    for the CLOSE of that file on its way out; now the first silence ends the connection."""
    timeout = 2.0
    t = _transport(own_sshd, hub_root, own_sshd.port, io_timeout=timeout, connect_timeout=1.0)
    t.write_at(FOLDER, NAME, 0, b"{}\n")
    _freeze(own_sshd)
    calls: dict[str, tuple[str, Callable[[], object]]] = {
        "read": (NAME, lambda: t.read(FOLDER, NAME, 0, 100)),
        "write_at": (NAME, lambda: t.write_at(FOLDER, NAME, 3, b"{}\n")),
        "replace": ("w.json", lambda: t.replace(FOLDER, "w.json", b"{}")),
        "list_files": ("", lambda: t.list_files(FOLDER)),
    }
    name, run = calls[call]
    result, took = _bounded(run, 10 * timeout)
    assert isinstance(result, TransportTimeout), repr(result)
    where = f"{t.url}/{FOLDER}" + (f"/{name}" if name else "")
    assert str(result) == f"{where}: no answer within 2 s {HANGS}"
    assert took < 1.5 * timeout, f"{took:.1f} s for a {timeout:g} s timeout"
    # The next call connects again, and fails within the connection's bound.
    result, took = _bounded(lambda: t.size(FOLDER, NAME), 30)
    assert isinstance(result, TransportTimeout)
    assert str(result) == f"ssh://127.0.0.1:{own_sshd.port}: no SSH handshake within 1 s {HANGS}"
    assert took < 1 + 1.5
    t.close()


# --- an interrupted replace --------------------------------------------------------------------


def _temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


def test_a_replace_cut_off_before_its_rename_leaves_no_temp_file_after_the_next(
    own_sshd: SshdServer, hub_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies (its sshd process killed) after the temp file is written, just
    before the rename: the call fails, the temp file stays (no connection to remove it
    with); the next replace of that name removes it, and no listing ever shows it."""
    t = _transport(own_sshd, hub_root, own_sshd.port)
    t.replace(FOLDER, NAME, b"first\n")
    rename = TimedSFTPClient.posix_rename

    def killed_first(self: TimedSFTPClient, old: str, new: str) -> None:
        monkeypatch.setattr(TimedSFTPClient, "posix_rename", rename)  # once
        assert kill_sessions(own_sshd) == 1
        time.sleep(0.2)  # the kernel has closed the socket
        rename(self, old, new)

    monkeypatch.setattr(TimedSFTPClient, "posix_rename", killed_first)
    with pytest.raises(TransportError):
        t.replace(FOLDER, NAME, b"second\n")
    folder = hub_root / FOLDER
    assert len(_temp_files(folder)) == 1, "the scenario: a temp file left behind"
    assert (folder / NAME).read_bytes() == b"first\n"
    # Listed, but hidden: a pass reads no hidden file (tests/test_sync_ssh.py has the pass).
    assert [f.name[0] for f in t.list_files(FOLDER) if f.name != NAME] == ["."]
    (folder / ".other.jsonl.tmp-0123456789ab").write_bytes(b"not ours")  # another name's
    t.replace(FOLDER, NAME, b"third\n")
    assert _temp_files(folder) == [".other.jsonl.tmp-0123456789ab"]
    assert (folder / NAME).read_bytes() == b"third\n"
    t.close()


@pytest.mark.parametrize("call", ["write_at", "replace"])
def test_a_host_frozen_in_the_middle_of_a_write_fails_it_within_one_timeout(
    own_sshd: SshdServer, hub_root: Path, call: str
) -> None:
    """Frozen with a file open: the write's answer does not come, and then neither would
    the CLOSE that `with` sends on the way out (paramiko swallows its error after waiting
    the timeout again: twice the bound before the connection was closed at the first)."""
    timeout = 2.0
    t = _transport(own_sshd, hub_root, own_sshd.port, io_timeout=timeout)
    t.write_at(FOLDER, NAME, 0, b"")
    folder = hub_root / FOLDER
    data = b"".join(b'{"n":%09d}\n' % i for i in range(1_500_000))  # 24 MB: takes a while

    frozen_at: list[float] = []

    def freeze_when_bytes_land() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(p.stat().st_size >= 1_000_000 for p in folder.iterdir()):
                break
            time.sleep(0.001)
        _freeze(own_sshd)
        frozen_at.append(time.monotonic())

    freezer = threading.Thread(target=freeze_when_bytes_land)
    freezer.start()
    run = {
        "write_at": lambda: t.write_at(FOLDER, NAME, 0, data),
        "replace": lambda: t.replace(FOLDER, "w.json", data),
    }[call]
    try:
        result, _ = _bounded(run, 60)
        ended = time.monotonic()
    finally:
        freezer.join()
    assert isinstance(result, TransportTimeout), repr(result)
    assert str(result).endswith(f": no answer within 2 s {HANGS}")
    took = ended - frozen_at[0]
    assert took < 1.5 * timeout, f"{took:.1f} s after the freeze, for a {timeout:g} s timeout"
