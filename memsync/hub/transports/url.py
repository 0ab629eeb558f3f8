"""A hub remote's `url`, parsed and checked: a folder, an SSH host or an S3 bucket.

Pure (a string in, a `RemoteURL` or one-line `ValueError` out): the config checks every
remote's url with it, and a transport is opened from its parts (`memsync.config.wiring`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

__all__ = ["RemoteURL", "parse_remote_url"]

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_HOST_RE = re.compile(r"[A-Za-z0-9._:%-]+")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_S3_PREFIX_PART_RE = re.compile(r"[A-Za-z0-9._~-]{1,255}")
_URL_FORMS = (
    "a path, file:///path, ssh://[user@]host[:port]/path, ssh://alias/path or s3://bucket/prefix"
)


@dataclass(frozen=True, slots=True)
class RemoteURL:
    """A remote's url, parsed. `path` is absolute (`~` expanded) for a folder remote."""

    scheme: Literal["file", "ssh", "s3"]
    """"file" for a folder (local, NFS, SMB, a synced folder), "ssh" for an SFTP hub, "s3"
    for S3-compatible object storage."""
    path: str
    """The hub directory: on this machine for "file", on the SSH host for "ssh" (absolute,
    or `~/...` in the login's home folder); for "s3" the key prefix in the bucket, without
    slashes at either end ("" for the bucket root)."""
    host: str | None = None
    """SSH host name, address or `~/.ssh/config` alias (lower case, as OpenSSH matches it);
    for "s3" the bucket."""
    user: str | None = None
    """SSH user; None means `~/.ssh/config` or the local user name."""
    port: int | None = None
    """SSH port; None means `~/.ssh/config` or 22."""


def parse_remote_url(url: str) -> RemoteURL:
    """Parse a remote's url in one of the four accepted forms.

    Args:
        url: `/path` or `~/path`, `file:///path`, `ssh://[user@]host[:port]/path`, or
            `ssh://alias/path` (an alias is resolved through `~/.ssh/config` by the transport);
            an ssh path `/~/path` is `path` in the login's home folder on the host.

    Returns:
        The parsed `RemoteURL`; percent-escapes are decoded.

    Raises:
        ValueError: with a one-line message saying what is wrong and what to write instead.
            A password in an ssh url is refused without echoing it.

    Example:
        >>> parse_remote_url("ssh://me@nas:2222/srv/memsync")
        RemoteURL(scheme='ssh', path='/srv/memsync', host='nas', user='me', port=2222)
    """
    if not url.strip():
        raise ValueError(f"empty url; write {_URL_FORMS}")
    if url != url.strip() or any(ord(ch) < 0x20 or ch == "\x7f" for ch in url):
        raise ValueError("url has surrounding spaces or control characters")
    scheme, sep, _ = url.partition("://")
    if not sep or not _SCHEME_RE.fullmatch(scheme):
        return _parse_local(url)
    scheme = scheme.lower()
    if scheme == "file":
        return _parse_file_url(url)
    if scheme == "ssh":
        return _parse_ssh_url(url)
    if scheme == "s3":
        return _parse_s3_url(url)
    # Do not echo the url: it may hold credentials meant for another tool.
    raise ValueError(f"unsupported url scheme {scheme!r}; write {_URL_FORMS}")


def _parse_local(text: str) -> RemoteURL:
    expanded = os.path.expanduser(text)
    if not os.path.isabs(expanded):
        # "user@host:path" is scp's syntax, not a relative path the user meant.
        scp_like = re.match(r"[^/]*:", text) is not None
        hint = "; for SSH write ssh://[user@]host/path" if scp_like else ""
        raise ValueError(f"{text!r} is not an absolute path; write /path or ~/path{hint}")
    return RemoteURL(scheme="file", path=expanded)


def _parse_file_url(url: str) -> RemoteURL:
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError(f"{url!r} has a ?query or #fragment; percent-encode '?' and '#' in paths")
    if parts.netloc not in ("", "localhost"):
        raise ValueError(
            f"{url!r} names a host ({parts.netloc!r}); write file:///path (three slashes)"
            " for a folder, or ssh://host/path for another machine"
        )
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise ValueError(f"{url!r} has no absolute path; write file:///path")
    return RemoteURL(scheme="file", path=path)


def _parse_ssh_url(url: str) -> RemoteURL:
    parts = urlsplit(url)
    # First, before any message that could echo the url.
    if parts.password is not None:
        raise ValueError("no passwords in the config; use a key or ssh-agent")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError(f"{url!r} has a ?query or #fragment; percent-encode '?' and '#' in paths")
    host = parts.hostname
    if not host:
        raise ValueError(f"{url!r} has no host; write ssh://[user@]host[:port]/path")
    # A leading "-" would read as an option if a host or user ever reached an ssh command line.
    if not _HOST_RE.fullmatch(host) or host.startswith("-"):
        raise ValueError(f"{url!r}: invalid host name {host!r}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise ValueError(f"{url!r}: the port must be a number from 1 to 65535")
    user = None if parts.username is None else unquote(parts.username)
    if user is not None and (not user or user.startswith("-") or "/" in user):
        raise ValueError(f"{url!r}: invalid user name {user!r}")
    path = unquote(parts.path)
    if not path or path == "/":
        raise ValueError(f"{url!r} has no path; write ssh://host/path/to/hub")
    if path == "/~" or path.startswith("/~/"):
        # ssh://host/~/hub: in the login's home folder, like scp's host:~/hub (issue 13,
        # item 23). Kept as "/~/hub", the host would be asked for a root folder named "~".
        path = path[1:]
    return RemoteURL(scheme="ssh", path=path, host=host, user=user, port=port)


def _parse_s3_url(url: str) -> RemoteURL:
    parts = urlsplit(url)
    # First, before any message that could echo the url.
    if "@" in parts.netloc:
        raise ValueError(
            "no credentials in the url; S3 credentials come from the environment, "
            "~/.aws/credentials or a profile"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError(f"{url!r} has a ?query or #fragment; write s3://bucket/prefix")
    bucket = parts.netloc
    if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        raise ValueError(
            f"{url!r}: invalid bucket name {bucket!r} (3 to 63 of a-z 0-9 . -);"
            " write s3://bucket/prefix"
        )
    prefix = parts.path.strip("/")
    if prefix and any(
        not _S3_PREFIX_PART_RE.fullmatch(part) or part in (".", "..") for part in prefix.split("/")
    ):
        raise ValueError(
            f"{url!r}: invalid prefix {prefix!r}; use / separated parts of A-Z a-z 0-9 . _ ~ -"
        )
    return RemoteURL(scheme="s3", path=prefix, host=bucket)
