"""Transports: how memsync reaches a hub (a shared directory, an SSH host, an S3 bucket).

`open_transport` builds one from a url, as a remote in the config writes it; paramiko is
imported only when an SSH transport is opened, boto3 only when an S3 one is used, so that
`import memsync` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import overload

from memsync.errors import TransportError
from memsync.hub.transports.base import (
    Fragments,
    PushChunks,
    RemoteFile,
    Transport,
    Truncates,
    WriteMode,
    validate_name,
)
from memsync.hub.transports.url import parse_remote_url

__all__ = [
    "Fragments",
    "PushChunks",
    "RemoteFile",
    "Transport",
    "Truncates",
    "WriteMode",
    "open_transport",
    "validate_name",
]


@overload
def open_transport(
    url: str,
    /,
    *,
    identity_file: str | Path | None = None,
    known_hosts: str | Path | None = None,
    accept_new_host_key: bool = False,
    timeout: float | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> Transport: ...


@overload
def open_transport(
    scheme: str,
    path: str,
    /,
    *,
    host: str | None = None,
    user: str | None = None,
    port: int | None = None,
    identity_file: str | Path | None = None,
    known_hosts: str | Path | None = None,
    accept_new_host_key: bool = False,
    timeout: float | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> Transport: ...


def open_transport(
    url: str,
    path: str | None = None,
    /,
    *,
    host: str | None = None,
    user: str | None = None,
    port: int | None = None,
    identity_file: str | Path | None = None,
    known_hosts: str | Path | None = None,
    accept_new_host_key: bool = False,
    timeout: float | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> Transport:
    """Return the transport for a hub; nothing is connected until the first call.

    Args:
        url: the hub, written as a remote's `url` in the config (issue 19, item 6): a
            folder `/path`, `~/path` or `file:///path`, `ssh://[user@]host[:port]/path`
            (or an `~/.ssh/config` alias), `s3://bucket/prefix`. The older form,
            `open_transport(scheme, path, host=..., user=..., port=...)` with scheme
            "file", "ssh" or "s3", is still accepted.
        path: the older form only: the hub root directory; for "s3" the key prefix.
        host, user, port: the older form only: for "ssh" (for "s3", `host` is the bucket).
        identity_file, known_hosts, accept_new_host_key: for SSH only; see
            `memsync.hub.transports.ssh.SSHTransport`.
        timeout: for SSH and S3: seconds to wait for any one answer (`io_timeout`, S3's
            read timeout), and for the connection set-up (`connect_timeout`, at most 10 s);
            None: 30 s.
        endpoint_url, region, profile: for S3 only; see `memsync.hub.transports.s3.S3Transport`.

    Raises:
        TransportError: a url the config would refuse (the one-line reason, the url not
            echoed: it may hold a password), an unknown scheme, or SSH or S3 without a
            host (bucket).

    Example:
        >>> hub = open_transport("/mnt/shared/memsync")
        >>> vm = open_transport("ssh://me@vm/srv/memsync", timeout=10)
    """
    scheme = url
    if path is None:
        try:
            parsed = parse_remote_url(url)
        except ValueError as exc:
            raise TransportError(f"remote url: {exc}") from None
        scheme, path = parsed.scheme, parsed.path
        host, user, port = parsed.host, parsed.user, parsed.port
    if scheme == "file":
        from memsync.hub.transports.localdir import LocalDirTransport

        return LocalDirTransport(Path(path))
    if scheme == "ssh":
        if not host:
            raise TransportError(f"ssh remote {path!r}: no host given", None, path)
        from memsync.hub.transports.ssh import SSHTransport

        io_timeout = 30.0 if timeout is None else timeout
        return SSHTransport(
            host,
            path,
            user=user,
            port=port,
            identity_file=identity_file,
            known_hosts=known_hosts,
            accept_new_host_key=accept_new_host_key,
            connect_timeout=min(10.0, io_timeout),
            io_timeout=io_timeout,
        )
    if scheme == "s3":
        if not host:
            raise TransportError(f"s3 remote {path!r}: no bucket given", host, path)
        from memsync.hub.transports.s3 import S3Transport

        return S3Transport(
            host,
            path,
            endpoint_url=endpoint_url,
            region=region,
            profile=profile,
            timeout=30.0 if timeout is None else timeout,
        )
    raise TransportError(
        f"unknown remote scheme {scheme!r}; expected 'file', 'ssh' or 's3'", host, path
    )
