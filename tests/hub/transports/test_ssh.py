"""SSHTransport against a real OpenSSH server: host keys, config aliases, timeouts, and
what happens when the connection drops, before, during and between calls."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.errors import HostKeyError, TransportError, TransportTimeout
from memsync.hub.transports.ssh import SSHTransport
from tests.helpers.sshd import (
    SshdServer,
    free_port,
    keygen,
    kill_sessions,
    session_pids,
    start_sshd,
)

pytestmark = pytest.mark.integration

FOLDER = "notes"
NAME = "laptop-1a2b.jsonl"


def _transport(server: SshdServer, root: Path, **kwargs: object) -> SSHTransport:
    options: dict[str, object] = {
        "port": server.port,
        "user": server.user,
        "identity_file": server.client_key,
        "known_hosts": server.known_hosts,
        "ssh_config_path": root.parent / "no-ssh-config",
    }
    options.update(kwargs)
    return SSHTransport(server.host, str(root), **options)  # type: ignore[arg-type]


@pytest.fixture
def hub_root(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    root.mkdir()
    return root


@pytest.fixture
def ssh(sshd_server: SshdServer, hub_root: Path) -> Iterator[SSHTransport]:
    t = _transport(sshd_server, hub_root)
    yield t
    t.close()


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshdServer]:
    """A server of the test's own, for tests that kill, freeze or restart it."""
    server = start_sshd(tmp_path / "sshd")
    yield server
    server.stop()


# --- host keys --------------------------------------------------------------------------------


def test_unknown_host_key_is_refused_with_its_fingerprint(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "empty_known_hosts"
    t = _transport(sshd_server, hub_root, known_hosts=known_hosts)
    with pytest.raises(HostKeyError) as caught:
        t.list_files(FOLDER)
    message = str(caught.value)
    assert sshd_server.host_key_fingerprint in message  # as `ssh-keygen -lf` prints it
    assert f"ssh://127.0.0.1:{sshd_server.port}: unknown host key ssh-ed25519 SHA256:" in message
    assert "accept_new_host_key" in message
    assert "\n" not in message
    assert not known_hosts.exists()


def test_hashed_known_hosts_entries_are_honoured(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "hashed_known_hosts"
    known_hosts.write_bytes(sshd_server.known_hosts.read_bytes())
    subprocess.run(["ssh-keygen", "-H", "-f", str(known_hosts)], check=True, capture_output=True)
    assert known_hosts.read_text().startswith("|1|")
    t = _transport(sshd_server, hub_root, known_hosts=known_hosts)
    assert t.list_files(FOLDER) == []
    t.close()


def test_accept_new_records_the_key_but_a_changed_key_is_always_refused(
    own_sshd: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "ssh" / "known_hosts"
    first = _transport(own_sshd, hub_root, known_hosts=known_hosts, accept_new_host_key=True)
    assert first.list_files(FOLDER) == []
    first.close()
    assert stat_mode(known_hosts) == 0o600
    recorded = known_hosts.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{own_sshd.port} ssh-ed25519 AAAA")
    strict = _transport(own_sshd, hub_root, known_hosts=known_hosts)
    assert strict.list_files(FOLDER) == []  # the recorded key is now simply known
    strict.close()

    # The "same host" comes back with another key.
    port, old_fingerprint = own_sshd.port, own_sshd.host_key_fingerprint
    own_sshd.stop()
    other = start_sshd(tmp_path / "sshd2", port=port, user=own_sshd.user)
    try:
        changed = _transport(other, hub_root, known_hosts=known_hosts, accept_new_host_key=True)
        with pytest.raises(HostKeyError, match="HOST KEY CHANGED") as caught:
            changed.list_files(FOLDER)
        assert other.host_key_fingerprint in str(caught.value)
        assert old_fingerprint in str(caught.value)
        # The fix names the entry to remove (issue 13, item 21).
        assert f"ssh-keygen -R '[127.0.0.1]:{port}' -f {known_hosts}" in str(caught.value)
        assert known_hosts.read_text() == recorded  # nothing added, nothing replaced
    finally:
        other.stop()


def test_accept_new_appends_to_an_existing_known_hosts(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("# kept as it is, no final newline")
    t = _transport(sshd_server, hub_root, known_hosts=known_hosts, accept_new_host_key=True)
    assert t.list_files(FOLDER) == []
    t.close()
    kept, added = known_hosts.read_text().splitlines()
    assert kept == "# kept as it is, no final newline"
    assert added.startswith(f"[127.0.0.1]:{sshd_server.port} ssh-ed25519 ")


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# --- configuration --------------------------------------------------------------------------


def test_ssh_config_alias_is_honoured(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host memhub\n"
        "    HostName 127.0.0.1\n"
        f"    Port {sshd_server.port}\n"
        f"    User {sshd_server.user}\n"
        f"    IdentityFile {sshd_server.client_key}\n"
        "    IdentityFile ~/.ssh/surely-missing-key\n"
    )
    t = SSHTransport(
        "memhub", str(hub_root), known_hosts=sshd_server.known_hosts, ssh_config_path=config
    )
    assert t.url == f"ssh://{sshd_server.user}@127.0.0.1:{sshd_server.port}{hub_root}"
    assert t.write_at(FOLDER, NAME, 0, b"{}\n") == 3
    t.close()

    closed = free_port()
    overridden = SSHTransport(
        "memhub",
        str(hub_root),
        port=closed,
        known_hosts=sshd_server.known_hosts,
        ssh_config_path=config,
    )
    with pytest.raises(TransportError, match=f"127.0.0.1:{closed}"):
        overridden.list_files(FOLDER)  # the explicit port wins over the config file


def test_a_path_relative_to_the_login_directory(sshd_server: SshdServer, hub_root: Path) -> None:
    home = Path(os.path.expanduser(f"~{sshd_server.user}"))
    relative = os.path.relpath(hub_root, home)
    t = _transport(sshd_server, Path("~") / relative)
    assert t.write_at(FOLDER, NAME, 0, b"{}\n") == 3
    assert (hub_root / FOLDER / NAME).read_bytes() == b"{}\n"
    t.close()


def test_an_unknown_client_key_fails_without_asking_for_a_password(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    stranger = keygen(tmp_path / "stranger")
    t = _transport(sshd_server, hub_root, identity_file=stranger)
    start = time.monotonic()
    with pytest.raises(TransportError, match="refused the login as"):
        t.list_files(FOLDER)
    assert time.monotonic() - start < 5


# --- timeouts ---------------------------------------------------------------------------------


def test_a_closed_port_fails_fast(sshd_server: SshdServer, hub_root: Path) -> None:
    closed = free_port()
    t = _transport(sshd_server, hub_root, port=closed, connect_timeout=2.0)
    start = time.monotonic()
    with pytest.raises(TransportError, match=f"ssh://.*127.0.0.1:{closed}"):
        t.list_files(FOLDER)
    assert time.monotonic() - start < 2


def test_a_silent_server_times_out(sshd_server: SshdServer, hub_root: Path) -> None:
    with socket.socket() as silent:  # accepts TCP connections, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        t = _transport(sshd_server, hub_root, port=silent.getsockname()[1], connect_timeout=1.0)
        start = time.monotonic()
        with pytest.raises(TransportTimeout):
            t.list_files(FOLDER)
        assert time.monotonic() - start < 5


def test_a_frozen_session_times_out_and_the_next_call_reconnects(
    own_sshd: SshdServer, hub_root: Path
) -> None:
    t = _transport(own_sshd, hub_root, io_timeout=1.0)
    t.write_at(FOLDER, NAME, 0, b"{}\n")
    frozen = session_pids(own_sshd)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(TransportTimeout):
            t.read(FOLDER, NAME, 0, 100)
        assert time.monotonic() - start < 5
    finally:
        kill_sessions(own_sshd)
    assert t.read(FOLDER, NAME, 0, 100) == b"{}\n"
    t.close()


# --- one connection, dropped and remade ---------------------------------------------------------


def test_the_connection_is_opened_lazily_and_reused(own_sshd: SshdServer, hub_root: Path) -> None:
    t = _transport(own_sshd, hub_root)
    assert session_pids(own_sshd) == []  # nothing before the first call
    t.write_at(FOLDER, NAME, 0, b"a\n")
    client = t._client
    t.write_at(FOLDER, NAME, 2, b"b\n")
    assert t.read(FOLDER, NAME, 0, 10) == b"a\nb\n"
    assert t.list_files(FOLDER)[0].size == 4
    assert t._client is client
    assert len(session_pids(own_sshd)) == 1
    t.close()
    deadline = time.monotonic() + 5
    while session_pids(own_sshd) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session_pids(own_sshd) == []


def test_a_connection_killed_mid_write_fails_that_call_and_the_next_reconnects(
    own_sshd: SshdServer, hub_root: Path
) -> None:
    """The recovery the sync code relies on: a prefix landed, `size` says how much, and
    writing the rest at that offset gives the exact bytes."""
    t = _transport(own_sshd, hub_root)
    t.write_at(FOLDER, NAME, 0, b"")
    path = hub_root / FOLDER / NAME
    data = b"".join(b'{"n":%09d}\n' % i for i in range(1_500_000))  # 24 MB: takes a while
    killed = threading.Event()

    def kill_when_bytes_land() -> None:
        deadline = time.monotonic() + 30
        while path.stat().st_size < 1_000_000 and time.monotonic() < deadline:
            time.sleep(0.001)
        kill_sessions(own_sshd)
        killed.set()

    killer = threading.Thread(target=kill_when_bytes_land)
    killer.start()
    try:
        with pytest.raises(TransportError):
            t.write_at(FOLDER, NAME, 0, data)
    finally:
        killer.join()
    assert killed.is_set()
    landed = t.size(FOLDER, NAME)  # reconnects
    assert landed is not None
    assert 1_000_000 <= landed < len(data)
    assert path.read_bytes() == data[:landed], "a prefix of the data, never a hole"
    assert t.write_at(FOLDER, NAME, landed, data[landed:]) == len(data)
    assert path.read_bytes() == data
    t.close()


def test_a_connection_killed_between_calls_is_remade(own_sshd: SshdServer, hub_root: Path) -> None:
    t = _transport(own_sshd, hub_root)
    t.write_at(FOLDER, NAME, 0, b"{}\n")
    assert kill_sessions(own_sshd) == 1
    # The next call fails if it runs before paramiko sees the drop, else it reconnects at once
    # (nothing was sent on the dead connection, so that is safe even for a write).
    try:
        first = t.read(FOLDER, NAME, 0, 100)
    except TransportError:
        first = t.read(FOLDER, NAME, 0, 100)
    assert first == b"{}\n"
    assert t.write_at(FOLDER, NAME, 3, b"{}\n") == 6
    t.close()


# known_hosts lines paramiko cannot read (issue 13, item 19)


def test_cert_authority_and_odd_lines_do_not_break_known_hosts(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    """A `@cert-authority` line made paramiko's loader fail with "Incorrect padding" for
    every SSH remote; such lines, and lines paramiko cannot decode, are skipped."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        "@cert-authority *.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDN1Ab\n"
        "broken.example.com ssh-rsa not-base64!!\n"
        "lonely-host-field\n" + sshd_server.known_hosts.read_text()
    )
    t = _transport(sshd_server, hub_root, known_hosts=known_hosts)
    try:
        assert t.list_files(FOLDER) == []
    finally:
        t.close()


def test_a_revoked_host_key_is_refused_even_when_listed(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    known = sshd_server.known_hosts.read_text()
    _, key_type, blob = known.split()[:3]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(known + f"@revoked * {key_type} {blob}\n")
    t = _transport(sshd_server, hub_root, known_hosts=known_hosts, accept_new_host_key=True)
    with pytest.raises(HostKeyError, match="@revoked") as caught:
        t.list_files(FOLDER)
    assert sshd_server.host_key_fingerprint in str(caught.value)
    assert known_hosts.read_text() == known + f"@revoked * {key_type} {blob}\n"


# --- a failed login: one line naming the remote and the key, saying what to do --------------
# (issue 13, item 21: paramiko's own texts named neither: "No authentication methods
# available", "Private key file is encrypted", "encountered RSA key, expected OPENSSH key")


def _login_error(server: SshdServer, root: Path, **kwargs: object) -> str:
    t = _transport(server, root, **kwargs)
    with pytest.raises(TransportError) as caught:
        t.list_files(FOLDER)
    t.close()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"ssh://{kwargs.get('user', server.user)}@127.0.0.1:{server.port}")
    return message


@pytest.fixture
def no_agent_no_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ssh-agent and an empty ~/.ssh: only the keys a test names exist."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    return tmp_path / "home"


def test_no_key_at_all_says_how_to_give_one(
    sshd_server: SshdServer, hub_root: Path, no_agent_no_keys: Path
) -> None:
    message = _login_error(sshd_server, hub_root, identity_file=None)
    assert f"no key to log in with as {sshd_server.user}: set identity_file = " in message
    assert "ssh-agent" in message


@pytest.mark.parametrize("key_format", ["ed25519", "rsa-pem"])
def test_an_encrypted_key_says_load_it_into_the_agent(
    sshd_server: SshdServer, hub_root: Path, no_agent_no_keys: Path, key_format: str
) -> None:
    key = no_agent_no_keys / ".ssh" / "id_ed25519"
    kind = ["-t", "ed25519"] if key_format == "ed25519" else ["-t", "rsa", "-m", "PEM"]
    subprocess.run(
        ["ssh-keygen", "-q", *kind, "-N", "a passphrase", "-f", str(key)],
        check=True,
        capture_output=True,
    )
    for options in ({"identity_file": key}, {"identity_file": None}):  # named, or found
        message = _login_error(sshd_server, hub_root, **options)
        assert f"the key file {key} is encrypted: load it into ssh-agent (ssh-add {key})" in message
        assert "memsync does not ask for passphrases" in message


def test_a_missing_or_bogus_key_file_is_named(
    sshd_server: SshdServer, hub_root: Path, no_agent_no_keys: Path
) -> None:
    missing = no_agent_no_keys / "nope"
    assert f"the key file {missing} does not exist" in _login_error(
        sshd_server, hub_root, identity_file=missing
    )
    public = sshd_server.client_key.with_suffix(".pub")
    assert f"{public} is not a private key file" in _login_error(
        sshd_server, hub_root, identity_file=public
    )


def test_a_refused_key_names_the_user_and_the_key(
    sshd_server: SshdServer, hub_root: Path, no_agent_no_keys: Path
) -> None:
    other = keygen(no_agent_no_keys / "other")
    message = _login_error(sshd_server, hub_root, identity_file=other)
    assert f"127.0.0.1 refused the login as {sshd_server.user} with {other}: " in message
    assert f"~{sshd_server.user}/.ssh/authorized_keys" in message
    message = _login_error(sshd_server, hub_root, user="nobody-here")
    assert f"refused the login as nobody-here with {sshd_server.client_key}" in message


def test_a_missing_hub_folder_is_said_plainly(
    sshd_server: SshdServer, hub_root: Path, tmp_path: Path
) -> None:
    """Not "is the share mounted?": the host answered; the folder is not there."""
    t = _transport(sshd_server, tmp_path / "no-hub")
    with pytest.raises(TransportError) as caught:
        t.list_files(FOLDER)
    t.close()
    assert str(caught.value) == (
        f"hub folder missing: {t.url} does not exist on 127.0.0.1 "
        f"(make it there: mkdir -m 700 -p {tmp_path / 'no-hub'})"
    )
