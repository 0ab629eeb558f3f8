"""A real OpenSSH server on 127.0.0.1 for integration tests (ansible/pylibssh's fixture shape).

Plain helpers, so that any conftest can build fixtures on them:

    server = start_sshd(tmp_path)        # or skips when there is no sshd (fails under CI=true)
    ...  SSHTransport("127.0.0.1", str(hub), port=server.port, user=server.user,
                      identity_file=server.client_key, known_hosts=server.known_hosts)
    kill_sessions(server)                 # drop every open connection, keep listening
    server.stop()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "SshdServer",
    "find_sshd",
    "free_port",
    "host_key_fingerprint",
    "keygen",
    "kill_sessions",
    "session_pids",
    "start_sshd",
]


@dataclass
class SshdServer:
    """A running `sshd -D` serving SFTP (internal-sftp) for `user` with `client_key`."""

    host: str
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    host_key: Path
    host_key_fingerprint: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Stop the listener and every session it started."""
        kill_sessions(self)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def find_sshd() -> str | None:
    """The sshd binary (absolute: sshd re-executes itself), or None."""
    found = shutil.which("sshd") or shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:/sbin")
    return os.path.abspath(found) if found else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def keygen(path: Path) -> Path:
    """Make an ed25519 key pair without passphrase at `path` (and `path`.pub)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "memsync-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def host_key_fingerprint(public_key: Path) -> str:
    """`SHA256:...` as `ssh-keygen -lf` prints it."""
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(public_key)], check=True, capture_output=True, text=True
    ).stdout
    return out.split()[1]


def start_sshd(
    tmp: Path, *, port: int | None = None, host_key: Path | None = None, user: str | None = None
) -> SshdServer:
    """Start sshd on 127.0.0.1 with fresh keys under `tmp`, and wait until it listens.

    Skips the test when no sshd is installed, unless `CI=true`: then it fails, because CI
    must run the integration tests. `port` and `host_key` let a test restart "the same host"
    with another key.
    """
    sshd = find_sshd()
    if sshd is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no sshd found; install openssh-server (CI=true: not skipping)")
        pytest.skip("no sshd found (install openssh-server to run SSH tests)")
    tmp.mkdir(parents=True, exist_ok=True)
    if host_key is None:
        host_key = keygen(tmp / "ssh_host_ed25519_key")
    client_key = tmp / "id_ed25519"
    if not client_key.exists():
        keygen(client_key)
    authorized = tmp / "authorized_keys"
    authorized.write_bytes(client_key.with_suffix(".pub").read_bytes())
    authorized.chmod(0o600)
    # sshd's privilege separation directory; Debian makes it at boot (systemd RuntimeDirectory).
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    port = port or free_port()
    log = tmp / "sshd.log"
    options = {
        "Port": str(port),
        "ListenAddress": "127.0.0.1",
        "HostKey": str(host_key),
        "AuthorizedKeysFile": str(authorized),
        "PidFile": str(tmp / "sshd.pid"),
        "StrictModes": "no",
        "UsePAM": "no",
        "PasswordAuthentication": "no",
        "KbdInteractiveAuthentication": "no",
        "PermitRootLogin": "prohibit-password",
        "Subsystem": "sftp internal-sftp",
        "LogLevel": "ERROR",
    }
    argv = [sshd, "-D", "-e", "-f", "/dev/null"]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    with log.open("ab") as err:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    known_hosts = tmp / "known_hosts"
    public = host_key.with_suffix(".pub").read_text().split()
    known_hosts.write_text(f"[127.0.0.1]:{port} {public[0]} {public[1]}\n")
    server = SshdServer(
        host="127.0.0.1",
        port=port,
        user=user or _current_user(),
        client_key=client_key,
        known_hosts=known_hosts,
        host_key=host_key,
        host_key_fingerprint=host_key_fingerprint(host_key.with_suffix(".pub")),
        process=process,
        log=log,
    )
    deadline = time.monotonic() + 10
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as probe:
                probe.recv(4)  # the banner: sshd is serving, not just listening
            break
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"sshd did not listen on {port}: {log.read_text()}") from None
            time.sleep(0.05)
    while session_pids(server) and time.monotonic() < deadline:
        time.sleep(0.01)  # the probe's connection process exits: tests count sessions
    return server


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def session_pids(server: SshdServer) -> list[int]:
    """The per-connection sshd processes: direct children of the listener."""
    return _children(server.process.pid)


def _children(pid: int) -> list[int]:
    """The direct children of `pid`: from /proc on Linux, else from `pgrep -P` (macOS)."""
    if not Path("/proc/self/task").is_dir():
        done = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False, timeout=10
        )
        return [int(p) for p in done.stdout.split()]
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            children += [int(p) for p in task.read_text().split()]
        except FileNotFoundError:  # the process (a session) ended meanwhile
            continue
    return children


def _descendants(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


def kill_sessions(server: SshdServer) -> int:
    """SIGKILL every connection's processes (each session and its privsep child); return how
    many connections there were. The listener keeps accepting new connections."""
    sessions = session_pids(server)
    for pid in sessions:
        for victim in [pid, *_descendants(pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
    return len(sessions)
