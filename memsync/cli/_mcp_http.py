"""`memsync mcp --http`: serve an MCP server over streamable HTTP, safely on any address.

Two things the SDK's own `run("streamable-http")` does not do (issue 24, items 1 and 16):

- **Host and Origin checks on every bind.** The SDK turns its DNS-rebinding protection on
  only for 127.0.0.1, localhost and ::1; on 127.0.0.2 (or any address given with
  `--allow-remote`) a page on `evil.example.com` resolved to that address could call
  `remember` through the person's browser. Here a request is answered only when its `Host`
  names the bound address or a loopback name with the bound port, or a name given with
  `--allow-host` (421 otherwise), and its `Origin`, when present, is one of those (403).
- **A port in use is one `memsync:` line, exit 2**, not uvicorn's log line and exit 3
  (which memsync's README reserves for a busy compaction): the socket is bound here, before
  uvicorn starts, and an `OSError` becomes a `MemsyncError`.

Imported only by `memsync.cli._agents.cmd_mcp` (it imports the SDK and uvicorn).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Callable, Sequence

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from memsync.errors import MemsyncError

__all__ = ["allowed_hosts", "serve_http", "transport_security"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _host_name(host: str) -> str:
    """`host` as it appears in a `Host` header: an IPv6 address in brackets."""
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            return f"[{host}]"
    except ValueError:
        pass
    return host


def allowed_hosts(host: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """The `Host` header values answered on a server bound to `host:port`: the bound
    address and the loopback names, each with the port (and bare when the port is 80, as
    browsers leave it out), plus every `extra` name (`--allow-host`) as given, and with
    any port when it has none (a reverse proxy in front may use its own port)."""
    names = [_host_name(host), *_LOOPBACK_NAMES]
    values = [f"{n}:{port}" for n in dict.fromkeys(names)]
    if port == 80:
        values += list(dict.fromkeys(names))
    for name in extra:
        values.append(name)
        if not name.endswith("]") and ":" not in name.rsplit("]", 1)[-1]:
            values.append(f"{name}:*")  # the SDK's pattern for "this name, any port"
    return values


def transport_security(
    host: str, port: int, extra: Sequence[str] = ()
) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, on whatever the bind: `allowed_hosts` for the
    `Host` header, and the same names over http and https for `Origin` (a browser sends
    one on cross-site requests; clients that are not browsers send none)."""
    hosts = allowed_hosts(host, port, extra)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")],
    )


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port`, as uvicorn would bind it.

    Raises:
        MemsyncError: the address is in use, not this machine's, or not an address.
    """
    # As uvicorn binds: IPv6 only for an address with ":", so "localhost" is 127.0.0.1.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        _, kind, proto, _, address = socket.getaddrinfo(
            host, port, family=family, type=socket.SOCK_STREAM
        )[0]
    except socket.gaierror as exc:
        raise MemsyncError(f"mcp: --host {host!r}: not an address ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        where = f"{_host_name(host)}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise MemsyncError(
                f"mcp: {where}: the port is in use (another server?); choose one with --port"
            ) from None
        raise MemsyncError(f"mcp: cannot listen on {where}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve_http(
    make_server: Callable[[], MCPServer], host: str, port: int, extra_hosts: Sequence[str] = ()
) -> None:
    """Serve the server `make_server` builds over streamable HTTP at
    `http://host:port/mcp` until interrupted, answering only requests whose Host and Origin
    name this server (see the module docstring). The port is bound first: a port in use
    fails before the memory file is opened or created.

    Raises:
        MemsyncError: the port is in use or the address cannot be bound.
    """
    sock = _bind(host, port)
    try:
        server = make_server()
    except BaseException:
        sock.close()
        raise
    app = server.streamable_http_app(
        transport_security=transport_security(host, port, extra_hosts), host=host
    )
    config = uvicorn.Config(app, log_level="warning")

    async def run() -> None:
        await uvicorn.Server(config).serve(sockets=[sock])

    try:
        anyio.run(run)
    finally:
        sock.close()
