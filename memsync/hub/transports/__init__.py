"""Transports: how memsync reaches a hub (a shared directory, an SSH host, an S3 bucket).

`open_transport` builds one from explicit arguments; paramiko is imported only when an SSH
transport is opened, boto3 only when an S3 one is used, so that `import memsync` stays light.
"""

from __future__ import annotations

from pathlib import Path

from memsync.errors import TransportError
from memsync.hub.transports.base import RemoteFile, Transport, validate_name

__all__ = ["RemoteFile", "Transport", "open_transport", "validate_name"]


def open_transport(
    scheme: str,
    path: str,
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
        scheme: "file" for a directory (local or mounted), "ssh" for an SSH host, "s3" for
            S3-compatible object storage.
        path: the hub root directory; for "s3" the key prefix in the bucket.
        host, user, port, identity_file, known_hosts, accept_new_host_key: for "ssh" only;
            see `memsync.hub.transports.ssh.SSHTransport`. For "s3", `host` is the bucket.
        timeout: for "ssh" and "s3": seconds to wait for any one answer (`io_timeout`, S3's
            read timeout), and for the connection set-up (`connect_timeout`, at most 10 s);
            None: 30 s.
        endpoint_url, region, profile: for "s3" only; see `memsync.hub.transports.s3.S3Transport`.

    Raises:
        TransportError: an unknown scheme, or "ssh" or "s3" without a host (bucket).

    Example:
        >>> hub = open_transport("file", "/mnt/shared/memsync")
    """
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
