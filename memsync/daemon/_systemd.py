"""The sd_notify protocol, without libsystemd: one datagram to `$NOTIFY_SOCKET`.

Shaped like maestral's `SystemdNotifier`; the protocol is in sd_notify(3). Outside systemd
(the variable unset) every call is a cheap no-op, so the daemon calls it unconditionally.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["notify", "watchdog_interval"]


def notify(state: str, env: Mapping[str, str] | None = None) -> bool:
    """Send `state` ("READY=1", "STATUS=...", "WATCHDOG=1", "STOPPING=1") to systemd.

    Returns True if the datagram was sent; False if `$NOTIFY_SOCKET` is unset or unusable
    or the send failed. Never raises: a notification is never worth stopping the daemon.
    """
    env = os.environ if env is None else env
    address = env.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        address = "\0" + address[1:]  # Linux abstract namespace
    elif not address.startswith("/"):
        return False  # unset, or a form we do not speak (vsock:, from systemd 253)
    data = state.encode("utf-8")
    try:
        # Python makes sockets close-on-exec itself (PEP 446); socket.SOCK_CLOEXEC, which
        # macOS does not have, would add nothing (issue 23).
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            return sock.sendto(data, address) == len(data)
    except OSError:
        return False


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Return how often to send "WATCHDOG=1", in seconds: half of `$WATCHDOG_USEC`.

    None when systemd expects no pings: `$WATCHDOG_USEC` unset or invalid, or
    `$WATCHDOG_PID` set to another process (sd_watchdog_enabled(3)).
    """
    env = os.environ if env is None else env
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        pid = env.get("WATCHDOG_PID")
        if pid is not None and int(pid) != os.getpid():
            return None
    except ValueError:
        return None
    return usec / 2_000_000 if usec > 0 else None
