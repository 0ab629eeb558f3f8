"""The SSH session's bounds (issue 13, item 15): an SFTP client that gives up the
connection at the first answer that does not come in time, and a deadline on the waits of
the connection set-up that paramiko leaves unbounded. See `memsync.hub.transports.ssh`."""

from __future__ import annotations

import threading
from typing import Self

import paramiko

from memsync.errors import MemsyncError

__all__ = ["Deadline", "TimedSFTPClient", "keeps_connection"]


class TimedSFTPClient(paramiko.SFTPClient):
    """paramiko's SFTP client, that closes the connection at the first answer which does not
    come within the channel's timeout (and remembers it: `timed_out`).

    Without this, a call that times out waits the timeout again for each request made on
    its way out: `SFTPFile.close` sends CLOSE and waits for the answer (swallowing the
    error), `with` blocks close their file. With the connection closed they fail at once.
    """

    timed_out = False

    def _read_packet(self) -> tuple[int, bytes]:
        try:
            return super()._read_packet()  # type: ignore[misc,no-any-return]  # (untyped)
        except TimeoutError:
            self._give_up()
            raise

    def _send_packet(self, t: int, packet: object) -> None:
        try:
            super()._send_packet(t, packet)  # type: ignore[misc]  # (not in the stubs)
        except TimeoutError:  # the server's window stays shut: it reads nothing any more
            self._give_up()
            raise

    def _give_up(self) -> None:
        self.timed_out = True
        transport = self.sock.get_transport()
        if transport is not None:
            transport.close()


class Deadline:
    """Closes `client` if the `with` block has not ended within `seconds`: a bound on the
    waits inside paramiko that have no timeout of their own (the `sftp` subsystem request
    waits for its answer forever), and on the sum of those that do.

    `expired` tells whether it fired; then whatever the block raised was caused by it.
    """

    def __init__(self, client: paramiko.SSHClient, seconds: float) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._done = False
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
        self._client.close()  # every wait of the set-up then ends (closed channel, socket)

    def __enter__(self) -> Self:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True


def keeps_connection(exc: BaseException) -> bool:
    """Whether `exc` is an answer of the SFTP server (the session is fine) or our own refusal."""
    if isinstance(exc, MemsyncError | FileNotFoundError | PermissionError):
        return True
    # paramiko turns other SFTP status codes into a bare IOError(text), without errno.
    return type(exc) is OSError and exc.errno is None
