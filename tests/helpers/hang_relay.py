"""A TCP relay that can go silent: what an SSH client sees behind a VPN that died.

    relay = FreezingRelay(server.port, freeze_after=3)   # each connection: 3 chunks, then silence
    ... connect to 127.0.0.1:relay.port ...
    relay.freeze()                                        # every connection, from now on
    relay.close()

Frozen, it reads nothing and sends nothing, and closes nothing: no reset, no FIN, the
kernel's buffers fill and stay full. Unlike SIGSTOP on sshd, the silence can start at any
point of a connection's life, counted in chunks the server sent (`freeze_after`), so that a
test can stop each step of the SSH and SFTP set-up in turn.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

__all__ = ["FreezingRelay"]


class FreezingRelay:
    """127.0.0.1:`port` -> 127.0.0.1:`target`, both ways, until frozen.

    Args:
        target: the port to relay to.
        freeze_after: freeze each connection once it has relayed this many chunks (recv
            results) from the server; None: only when `freeze()` is called.
    """

    def __init__(self, target: int, *, freeze_after: int | None = None) -> None:
        self.target = target
        self.freeze_after = freeze_after
        self.server_chunks: list[int] = []  # per connection: chunks relayed from the server
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        """Every connection, open or to come, goes silent."""
        self._frozen.set()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, server]
            self.server_chunks.append(0)
            index = len(self.server_chunks) - 1
            threading.Thread(target=self._pump, args=(client, server, index), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket, index: int) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ, server)
            sel.register(server, selectors.EVENT_READ, client)
            while not self._closed.is_set():
                if self._frozen.is_set() or self.server_chunks[index] == self.freeze_after:
                    self._closed.wait()  # silent: nothing read, nothing sent, nothing closed
                    return
                for key, _ in sel.select(0.05):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    if source is server and self.server_chunks[index] == self.freeze_after:
                        break  # the chunk that would be one too many stays unread
                    try:
                        data = source.recv(65536)
                    except OSError:
                        return
                    if not data:
                        with contextlib.suppress(OSError):
                            key.data.shutdown(socket.SHUT_WR)
                        sel.unregister(source)
                        continue
                    if source is server:
                        self.server_chunks[index] += 1
                    key.data.sendall(data)
