"""_systemd.py against real datagram sockets, and the shipped unit file."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.daemon._systemd import notify, watchdog_interval
from tests.helpers.paths import ROOT

UNIT = ROOT / "systemd" / "memsync.service"

HARDENING = {
    "NoNewPrivileges",
    "PrivateTmp",
    "ProtectSystem",
    "ProtectHome",
    "ReadWritePaths",
    "RestrictAddressFamilies",
    "LockPersonality",
    "RestrictRealtime",
    "MemoryDenyWriteExecute",
    "SystemCallArchitectures",
    "UMask",
}

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="AF_UNIX on Linux")


def _receiver(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(5)
    return sock


@pytest.fixture
def path_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    address = str(tmp_path / "notify.sock")
    if len(address) >= 100:  # sun_path holds 108 bytes
        pytest.skip("tmp_path too long for an AF_UNIX address")
    with _receiver(address) as sock:
        yield address, sock


@linux_only
def test_notify_to_path_socket(path_socket: tuple[str, socket.socket]) -> None:
    address, sock = path_socket
    assert notify("READY=1", env={"NOTIFY_SOCKET": address}) is True
    assert sock.recv(4096) == b"READY=1"
    assert notify("STATUS=syncing 2 memories, 1 remote down", env={"NOTIFY_SOCKET": address})
    assert sock.recv(4096) == b"STATUS=syncing 2 memories, 1 remote down"


@linux_only
def test_notify_to_abstract_socket() -> None:
    name = f"memsync-test-{uuid.uuid4().hex}"
    with _receiver("\0" + name) as sock:
        assert notify("WATCHDOG=1", env={"NOTIFY_SOCKET": "@" + name}) is True
        assert sock.recv(4096) == b"WATCHDOG=1"


@linux_only
def test_notify_defaults_to_os_environ(
    path_socket: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, sock = path_socket
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    assert notify("STOPPING=1") is True
    assert sock.recv(4096) == b"STOPPING=1"


def test_notify_without_socket_is_a_no_op() -> None:
    assert notify("READY=1", env={}) is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": ""}) is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": "relative/sock"}) is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": "vsock:2:1234"}) is False


def test_notify_to_missing_socket_returns_false(tmp_path: Path) -> None:
    assert notify("READY=1", env={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}) is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": "@no-such-" + uuid.uuid4().hex}) is False


def test_notify_to_non_socket_returns_false(tmp_path: Path) -> None:
    plain = tmp_path / "file"
    plain.write_text("x")
    assert notify("READY=1", env={"NOTIFY_SOCKET": str(plain)}) is False


def test_watchdog_interval() -> None:
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "60000000"}) == 30.0
    assert watchdog_interval({"WATCHDOG_USEC": "1500000"}) == 0.75
    mine = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": mine}) == 30.0
    other = str(os.getpid() + 1)
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": other}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "x"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "abc"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "-5"}) is None


def test_watchdog_interval_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "10000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    assert watchdog_interval() == 5.0


# --- the unit file --------------------------------------------------------------------


def _read_unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def test_unit_essentials() -> None:
    unit = _read_unit()
    service = unit["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert service["Restart"] == "on-failure"
    assert service["ExecStart"] == "%h/.local/bin/memsync daemon"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert int(service["WatchdogSec"]) > 0
    assert service["TimeoutStopSec"]
    assert service["UMask"] == "0077"
    assert service["ProtectSystem"] == "strict"
    assert "MemoryDenyWriteExecute" not in service
    assert set(service["RestrictAddressFamilies"].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert unit["Install"]["WantedBy"] == "default.target"


def test_every_hardening_line_is_commented() -> None:
    """A hardening directive in [Service] follows a comment line saying why."""
    section = ""
    previous = ""
    seen = set()
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        elif section == "[Service]" and "=" in stripped and not stripped.startswith("#"):
            key = stripped.split("=", 1)[0]
            if key in HARDENING:
                seen.add(key)
                assert previous.startswith("#"), f"{key}= needs a comment line above it"
        previous = stripped
    assert seen == HARDENING - {"MemoryDenyWriteExecute"}


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """`systemd-analyze --user verify` accepts the unit (it checks ExecStart= exists: a stub)."""
    binary = tmp_path / ".local" / "bin" / "memsync"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime)}
    result = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(UNIT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Unknown keys and bad values are only warnings, naming the file: fail on them too.
    assert UNIT.name not in output, output


def _readwrite_paths(home: Path) -> list[tuple[Path, bool]]:
    """The unit's ReadWritePaths= for `home`: each path, and whether it is optional ("-")."""
    out = []
    for word in _read_unit()["Service"]["ReadWritePaths"].split():
        optional = word.startswith("-")
        out.append((Path(word.lstrip("-").replace("%h", str(home))), optional))
    return out


def test_the_unit_may_write_every_default_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state directory, the default memory's folder and the config folder are in
    ReadWritePaths= (folders elsewhere need a drop-in, as the README says), and the unit
    makes the ones it requires before the sandbox needs them."""
    from memsync.config import default_config, default_config_path
    from memsync.local.dirs import default_state_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "MEMSYNC_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    allowed = _readwrite_paths(tmp_path)
    config = default_config()
    for needed in (config.state_dir, default_state_dir(), default_config_path().parent):
        assert any(needed == p or p in needed.parents for p, _ in allowed), needed
    for memory in config.memory:
        assert any(memory.path.parent == p or p in memory.path.parents for p, _ in allowed)
    made = _read_unit()["Service"]["ExecStartPre"].replace("%h", str(tmp_path)).split()
    assert all(str(p) in made for p, optional in allowed if not optional)


def test_the_readme_installs_memsync_where_the_unit_runs_it() -> None:
    """Issue 13, item 23: the README said `pip install --user .`, which Debian's and
    Ubuntu's Python refuse (PEP 668); pipx puts the command in ~/.local/bin, where the
    unit's ExecStart= runs it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    assert not [c for c in commands if c.startswith("pip install")]
    systemd_block = readme[readme.index("### As a systemd user service") :]
    assert "\npipx install .  " in systemd_block.split("```")[1]
    assert _read_unit()["Service"]["ExecStart"] == "%h/.local/bin/memsync daemon"
