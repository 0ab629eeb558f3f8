"""A hub directory on an SSH host, over paramiko's SFTP client.

- Hosts resolve through `~/.ssh/config` (HostName, User, Port, IdentityFile); explicit
  arguments win. Authentication is by key only (agent or identity file), never a password.
- Host keys are checked against `known_hosts`. An unknown key is refused unless
  `accept_new_host_key` (then it is recorded, like OpenSSH's `StrictHostKeyChecking
  accept-new`); a changed key is always refused.
- One connection, opened on first use and reused. When it drops, the call in progress raises
  `TransportError` and the next call reconnects. Nothing is retried here: after a failed
  `write_at` the outcome is unknown and only the caller, after `size`, may decide to write again.
- Every wait is bounded, so that a server that stops answering with the connection still
  open (a dead VPN, a frozen host: no reset ever comes) costs a bounded time (issue 13,
  item 15): the whole connection set-up (TCP, banner, key exchange, authentication, the SFTP
  channel and its version exchange) by `connect_timeout`, each SFTP answer by `io_timeout`.
  The first answer that does not come closes the connection, so that what the call does on
  its way out (closing a file handle, removing a temp file) does not wait again; the error
  says "no answer within N s".
- Writes go to an explicit offset (`r+` and seek), never with the SFTP append flag, in
  acknowledged chunks of 32 KiB, so that a failure leaves a prefix of the data and never a hole.
"""

from __future__ import annotations

import getpass
import os
import posixpath
import socket
import stat
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import paramiko
from paramiko.sftp import CMD_EXTENDED

from memsync.errors import HostKeyError, MemsyncError, TransportError, TransportTimeout
from memsync.hub.transports._ssh_auth import login_failure
from memsync.hub.transports._ssh_hostkeys import HostKeyPolicy, fingerprint, load_known_hosts
from memsync.hub.transports._ssh_session import Deadline, TimedSFTPClient, keeps_connection
from memsync.hub.transports.base import (
    RemoteFile,
    check_name,
    is_leftover_temp,
    is_timeout,
    map_errors,
    temp_name,
    validate_name,
)

if TYPE_CHECKING:
    from memsync.hub.transports.base import Transport

__all__ = ["SSHTransport"]

_CHUNK = 32 * 1024  # the largest SFTP write every server accepts (draft-ietf-secsh-filexfer)
_HANGS = "the server or the network hangs"
_T = TypeVar("_T")


class SSHTransport:
    """The `Transport` for a directory `path` on `host`, e.g. `ssh://me@host:22/srv/memsync`.

    Args:
        host: a host name, address, or `~/.ssh/config` alias.
        path: the hub root, absolute or relative to the login directory (`~/x` works too).
        user, port, identity_file: override what `ssh_config_path` says for `host`.
        known_hosts: OpenSSH known_hosts file (hashed and `[host]:port` entries work).
        accept_new_host_key: record an unknown host key instead of refusing it.
        connect_timeout: seconds for the whole connection set-up: TCP connect, SSH banner,
            key exchange, authentication, the SFTP channel and its version exchange.
        io_timeout: seconds to wait for any one SFTP answer (or for the server to take
            more data); the first that does not come ends the call and the connection.
    """

    def __init__(
        self,
        host: str,
        path: str,
        *,
        user: str | None = None,
        port: int | None = None,
        identity_file: str | Path | None = None,
        known_hosts: str | Path | None = None,
        accept_new_host_key: bool = False,
        ssh_config_path: str | Path = "~/.ssh/config",
        connect_timeout: float = 10.0,
        io_timeout: float = 30.0,
    ) -> None:
        config: dict[str, object] = {}
        config_path = Path(ssh_config_path).expanduser()
        if config_path.is_file():
            with map_errors(str(config_path)):
                config = dict(paramiko.SSHConfig.from_path(str(config_path)).lookup(host))
        self.alias = host
        self.hostname = str(config.get("hostname", host))
        self.user = user or str(config.get("user") or getpass.getuser())
        self.port = int(port or str(config.get("port", 22)))
        identities: list[str] = []
        if identity_file is not None:
            identities = [os.path.expanduser(identity_file)]
        else:
            listed = config.get("identityfile", [])
            assert isinstance(listed, list)
            # OpenSSH skips IdentityFile entries that do not exist; paramiko would fail on them.
            identities = [p for p in map(os.path.expanduser, listed) if os.path.isfile(p)]
        self.identity_files = identities
        self.known_hosts = Path(known_hosts or "~/.ssh/known_hosts").expanduser()
        self.accept_new_host_key = accept_new_host_key
        self.connect_timeout = connect_timeout
        self.io_timeout = io_timeout
        root = path.rstrip("/") or "/"
        if root == "~" or root.startswith("~/"):
            root = root[2:] or "."
        self.root = root
        self.server = f"ssh://{self.hostname}:{self.port}"
        if self.alias != self.hostname:
            self.server += f" (alias {self.alias})"
        shown = root if root.startswith("/") else "/~/" + root.removeprefix("./")
        self.url = f"ssh://{self.user}@{self.hostname}:{self.port}{shown}"
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SSHTransport({self.url!r})"

    @property
    def _known_hosts_name(self) -> str:
        """How known_hosts (and `ssh-keygen -R`) names this server, quoted for a shell."""
        return self.hostname if self.port == 22 else f"'[{self.hostname}]:{self.port}'"

    # --- connection -----------------------------------------------------------------------

    def _connect(self) -> paramiko.SFTPClient:
        client = paramiko.SSHClient()
        timeout, started = self.connect_timeout, time.monotonic()
        deadline = Deadline(client, timeout)
        try:
            revoked: set[bytes] = set()
            if self.known_hosts.is_file():
                revoked = load_known_hosts(self.known_hosts, client.get_host_keys())
            client.set_missing_host_key_policy(HostKeyPolicy(self, revoked))
            with deadline:
                sftp = self._handshake(client, timeout)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"{self.server}: HOST KEY CHANGED (possible man-in-the-middle): it offers "
                f"{exc.key.get_name()} {fingerprint(exc.key)}, but {self.known_hosts} has "
                f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}; if the change "
                f"is expected, remove the old entry (ssh-keygen -R {self._known_hosts_name} "
                f"-f {self.known_hosts}) and connect again"
            ) from None
        except MemsyncError:  # our host key refusal
            client.close()
            raise
        except BaseException as exc:
            session = client.get_transport()
            logging_in = session is not None and session.is_active()
            logging_in = logging_in and not session.is_authenticated()  # type: ignore[union-attr]
            client.close()
            # A stalled set-up surfaces as whatever the step in progress makes of it: a
            # socket timeout, "Error reading SSH protocol banner", "No existing session",
            # EOF, a closed channel (once the deadline closed the connection).
            failed = isinstance(exc, paramiko.SSHException | OSError | EOFError)
            if failed and (
                deadline.expired or is_timeout(exc) or time.monotonic() - started >= timeout
            ):
                raise TransportTimeout(
                    f"{self.server}: no SSH handshake within {timeout:g} s ({_HANGS})",
                    self.hostname,
                    self.root,
                ) from None
            if failed and logging_in:  # paramiko's last complaint: say which key, and why
                raise TransportError(
                    login_failure(self.url, self.hostname, self.user, self.identity_files, exc),
                    self.hostname,
                    self.root,
                ) from None
            raise
        self._client, self._sftp = client, sftp
        return sftp

    def _handshake(self, client: paramiko.SSHClient, timeout: float) -> TimedSFTPClient:
        """TCP, banner, key exchange, authentication, then the SFTP channel, by hand: paramiko's
        `open_sftp` sets no timeout on the channel before the SFTP version exchange."""
        client.connect(
            self.hostname,
            port=self.port,
            username=self.user,
            password=None,  # keys only: no password or keyboard-interactive fallback
            # paramiko takes a list here too; types-paramiko says str only.
            key_filename=self.identity_files or None,  # type: ignore[arg-type]
            allow_agent=True,
            look_for_keys=not self.identity_files,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            channel_timeout=timeout,
        )
        transport = client.get_transport()
        assert transport is not None  # connect() returned: it is there
        if isinstance(transport.sock, socket.socket):
            # Without it a 32 KiB SFTP write (two SSH packets) waits for the peer's delayed
            # ACK under Nagle: ~30 ms per chunk, 100x slower on loopback (OpenSSH sets it).
            transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        channel = transport.open_session(timeout=timeout)
        channel.settimeout(self.io_timeout)
        channel.invoke_subsystem("sftp")  # waits without a timeout: the deadline bounds it
        return TimedSFTPClient(channel)

    def _session(self) -> paramiko.SFTPClient:
        transport = self._client.get_transport() if self._client else None
        if self._sftp is not None and transport is not None and transport.is_active():
            return self._sftp
        self._drop()  # known dead before anything was sent: reconnecting is safe
        return self._connect()

    def _drop(self) -> None:
        client, self._client, self._sftp = self._client, None, None
        if client is not None:
            client.close()

    def _call(self, where: str, op: Callable[[paramiko.SFTPClient], _T]) -> _T:
        shown = f"{self.url}/{where}".rstrip("/")
        with (
            self._lock,
            map_errors(shown, host=self.hostname, path=posixpath.join(self.root, where)),
        ):
            sftp = self._session()
            try:
                return op(sftp)
            except BaseException as exc:
                if not keeps_connection(exc):
                    self._drop()  # the next call reconnects
                if isinstance(sftp, TimedSFTPClient) and sftp.timed_out:
                    # Whatever the call raised after (EOF on the closed connection, or the
                    # timeout itself), the cause is the silence.
                    raise TransportTimeout(
                        f"{shown}: no answer within {self.io_timeout:g} s ({_HANGS})"
                    ) from None
                raise

    def close(self) -> None:
        with self._lock:
            self._drop()

    # --- helpers (run inside _call) -------------------------------------------------------

    def _path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def _check_root(self, sftp: paramiko.SFTPClient) -> None:
        """Raise unless the hub root is a folder on the host: a missing hub is an error,
        never an empty memory. Said plainly (issue 13, item 21): the host is up and
        answered, so "is the share mounted?" (a folder hub's question) does not apply."""
        on = f"on {self.hostname}"
        try:
            attrs = sftp.stat(self.root)
        except FileNotFoundError:
            shown = self.root if self.root.startswith("/") else "~/" + self.root
            raise TransportError(
                f"hub folder missing: {self.url} does not exist {on} (make it there: "
                f"mkdir -m 700 -p {shown})"
            ) from None
        except PermissionError:
            raise TransportError(
                f"hub folder unreadable: {self.url}: permission denied {on}"
            ) from None
        if attrs.st_mode is None or not stat.S_ISDIR(attrs.st_mode):
            raise TransportError(f"hub folder missing: {self.url} is not a folder {on}")

    def _lstat(self, sftp: paramiko.SFTPClient, path: str) -> paramiko.SFTPAttributes | None:
        try:
            return sftp.lstat(path)
        except FileNotFoundError:
            return None

    def _regular(self, attrs: paramiko.SFTPAttributes, where: str) -> int:
        mode = attrs.st_mode or 0
        if stat.S_ISLNK(mode):
            raise TransportError(f"{self.url}/{where}: is a symlink; refusing to follow it")
        if not stat.S_ISREG(mode):
            raise TransportError(f"{self.url}/{where}: not a regular file")
        return attrs.st_size or 0

    def _folder(self, sftp: paramiko.SFTPClient, folder: str, *, create: bool) -> bool:
        """Whether `<root>/<folder>` is a directory (made 0700 if `create`); never the root."""
        path = self._path(folder)
        attrs = self._lstat(sftp, path)
        if attrs is None:
            self._check_root(sftp)
            if not create:
                return False
            with suppress(OSError):  # "Failure" if another of our processes made it meanwhile
                sftp.mkdir(path, 0o700)
            attrs = self._lstat(sftp, path)
        if attrs is None or not stat.S_ISDIR(attrs.st_mode or 0):
            raise TransportError(
                f"{self.url}/{folder}: not a directory (symlinks are not followed)"
            )
        return True

    @staticmethod
    def _fsync(sftp: paramiko.SFTPClient, f: paramiko.SFTPFile) -> None:
        # paramiko has no fsync; OpenSSH's sftp-server offers it as an extension. Servers
        # without it answer "unsupported", and then a flushed write is the best we get.
        try:
            sftp._request(CMD_EXTENDED, "fsync@openssh.com", f.handle)  # type: ignore[attr-defined]
        except OSError as exc:
            if type(exc) is not OSError or exc.errno is not None:
                raise
            if "unsupported" not in str(exc).lower():
                raise

    # --- the Transport protocol -----------------------------------------------------------

    def list_files(self, folder: str) -> list[RemoteFile]:
        check_name(self.url, folder)

        def op(sftp: paramiko.SFTPClient) -> list[RemoteFile]:
            if not self._folder(sftp, folder, create=False):
                return []
            # sftp-server reports each entry with lstat(), so links are S_ISLNK, not followed.
            files = [
                RemoteFile(a.filename, a.st_size or 0, float(a.st_mtime or 0))
                for a in sftp.listdir_attr(self._path(folder))
                if validate_name(a.filename) and stat.S_ISREG(a.st_mode or 0)
            ]
            return sorted(files, key=lambda f: f.name)

        return self._call(folder, op)

    def size(self, folder: str, name: str) -> int | None:
        check_name(self.url, folder, name)
        where = f"{folder}/{name}"

        def op(sftp: paramiko.SFTPClient) -> int | None:
            attrs = self._lstat(sftp, self._path(folder, name))
            if attrs is None:
                self._check_root(sftp)
                return None
            return self._regular(attrs, where)

        return self._call(where, op)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        check_name(self.url, folder, name)
        where = f"{folder}/{name}"
        if offset < 0:
            raise TransportError(f"{self.url}/{where}: negative offset {offset}")

        def op(sftp: paramiko.SFTPClient) -> bytes:
            path = self._path(folder, name)
            attrs = sftp.lstat(path)
            self._regular(attrs, where)
            if limit <= 0:
                return b""
            with sftp.open(path, "r") as f:
                f.seek(offset)
                return f.read(limit)

        return self._call(where, op)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        check_name(self.url, folder, name)
        where = f"{folder}/{name}"
        if offset < 0:
            raise TransportError(f"{self.url}/{where}: negative offset {offset}")

        def op(sftp: paramiko.SFTPClient) -> int:
            path = self._path(folder, name)
            attrs = self._lstat(sftp, path)
            if attrs is None:
                if offset != 0:
                    raise TransportError(
                        f"{self.url}/{where}: does not exist; cannot write at {offset}"
                    )
                self._folder(sftp, folder, create=True)
                f = sftp.open(path, "wx")  # O_EXCL: never truncate what someone just made
            else:
                size = self._regular(attrs, where)
                if offset > size:
                    raise TransportError(
                        f"{self.url}/{where}: cannot write at {offset}, past the end {size}"
                    )
                f = sftp.open(path, "r+")
            with f:
                if attrs is None:
                    f.chmod(0o600)
                f.set_pipelined(False)  # each chunk acknowledged before the next: no holes
                f.seek(offset)
                try:
                    for start in range(0, len(data), _CHUNK):
                        f.write(data[start : start + _CHUNK])
                    f.flush()
                    self._fsync(sftp, f)
                except OSError:
                    # A full disk on the server (an SFTP failure status is an IOError):
                    # take the partial write back while the session lives, so that no torn
                    # line stays in the hub (issue 13, item 14). A dead session cannot:
                    # the next pass cuts it off instead (memsync.hub.push).
                    with suppress(Exception):
                        f.truncate(offset)
                    raise
                return f.stat().st_size or 0

        return self._call(where, op)

    def truncate(self, folder: str, name: str, size: int) -> None:
        """Cut our own file back to `size` bytes (see `LocalDirTransport.truncate`)."""
        check_name(self.url, folder, name)
        where = f"{folder}/{name}"

        def op(sftp: paramiko.SFTPClient) -> None:
            path = self._path(folder, name)
            attrs = self._lstat(sftp, path)
            if attrs is None:
                raise TransportError(f"{self.url}/{where}: does not exist; cannot cut it")
            self._regular(attrs, where)
            sftp.truncate(path, size)

        self._call(where, op)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        """`Transport.replace`: a temp file `.<name>.tmp-<12 hex>` written, fsynced, renamed.

        Leftover temp files of `name` (a replace cut off between write and rename: the
        connection dropped, the process was killed) are removed first. Only this replica
        replaces its own files and one pass at a time does so on this machine (the pass
        lock), so any such file is a leftover: callers must not replace one name twice at
        once (the slower one would then fail, its target untouched).
        """
        check_name(self.url, folder, name)
        where = f"{folder}/{name}"

        def op(sftp: paramiko.SFTPClient) -> None:
            self._folder(sftp, folder, create=True)
            self._remove_leftovers(sftp, folder, name)
            tmp = self._path(folder, temp_name(name))
            try:
                with sftp.open(tmp, "wx") as f:
                    f.chmod(0o600)
                    # Not pipelined: paramiko drops the error status of pipelined writes that
                    # another request's reply overtakes, so a failed chunk could go unnoticed.
                    f.set_pipelined(False)
                    for start in range(0, len(data), _CHUNK):
                        f.write(data[start : start + _CHUNK])
                    f.flush()
                    self._fsync(sftp, f)
                sftp.posix_rename(tmp, self._path(folder, name))
            except BaseException as exc:
                # Else the session is gone and the temp file stays: the next replace of
                # `name` removes it.
                if keeps_connection(exc):
                    with suppress(Exception):  # best effort: the first error is the one to report
                        sftp.remove(tmp)
                raise

        self._call(where, op)

    def _remove_leftovers(self, sftp: paramiko.SFTPClient, folder: str, name: str) -> None:
        """Remove the temp files of `name` that an interrupted `replace` left in `folder`."""
        for found in sftp.listdir(self._path(folder)):
            if is_leftover_temp(found, name):
                with suppress(FileNotFoundError):  # a link is removed, never followed
                    sftp.remove(self._path(folder, found))


if TYPE_CHECKING:

    def _conforms(t: SSHTransport) -> Transport:
        return t
