"""SSH host keys: reading known_hosts, refusing an unknown, revoked or changed key, and
recording a new one when the user said `accept_new_host_key` (split from ssh.py, which
keeps the connection and the SFTP calls)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from contextlib import suppress
from pathlib import Path
from typing import Protocol

import paramiko

from memsync.errors import HostKeyError
from memsync.hub.transports.base import map_errors
from memsync.local.logs import get_logger

__all__ = ["HostKeyPolicy", "Server", "fingerprint", "load_known_hosts"]

_log = get_logger(__name__)


class Server(Protocol):
    """What the policy needs of the connection it checks (an `SSHTransport`)."""

    server: str  # how messages name it, e.g. ssh://host:22
    hostname: str
    port: int
    known_hosts: Path
    accept_new_host_key: bool


def fingerprint(key: paramiko.PKey) -> str:
    """The OpenSSH form of a key's fingerprint: `SHA256:<base64 without padding>`."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def load_known_hosts(path: Path, into: paramiko.HostKeys) -> set[bytes]:
    """Load an OpenSSH known_hosts file into `into`; return the `@revoked` keys' blobs.

    paramiko's own loader stops the whole file on a line it cannot decode (a
    `@cert-authority` line gives "Incorrect padding"), which broke every SSH remote. Here
    such a line is skipped with a debug note; `@revoked` keys are returned so that the
    caller refuses them even where another line lists them as known.
    """
    revoked: set[bytes] = set()
    entries: list[paramiko.hostkeys.HostKeyEntry] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line_no, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@"):
                marker, _, rest = line.partition(" ")
                fields = rest.split()
                if marker == "@revoked" and len(fields) >= 3:
                    with suppress(binascii.Error, ValueError):
                        revoked.add(base64.b64decode(fields[2], validate=True))
                        continue
                _log.debug("%s:%d: %s line skipped (not supported)", path, line_no, marker)
                continue
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line, line_no)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError) as exc:
                _log.debug("%s:%d: line skipped (%s)", path, line_no, exc)
                continue
            if entry is not None and entry.key is not None:
                entries.append(entry)
    for entry in entries:
        if entry.key.asbytes() not in revoked:
            for name in entry.hostnames:
                into.add(name, entry.key.get_name(), entry.key)
    return revoked


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse an unknown or revoked host key; record an unknown one when the user said
    `accept_new_host_key`."""

    def __init__(self, owner: Server, revoked: set[bytes]) -> None:
        self.owner = owner
        self.revoked = revoked

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        owner = self.owner
        described = f"{key.get_name()} {fingerprint(key)}"
        if key.asbytes() in self.revoked:
            raise HostKeyError(
                f"{owner.server}: host key {described} is marked @revoked in "
                f"{owner.known_hosts}; refusing to connect"
            )
        if not owner.accept_new_host_key:
            raise HostKeyError(
                f"{owner.server}: unknown host key {described}; check it, then add it to "
                f"{owner.known_hosts} (ssh-keyscan -p {owner.port} {owner.hostname}) "
                "or set accept_new_host_key = true"
            )
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        with map_errors(f"recording the host key of {owner.server} in {owner.known_hosts}"):
            owner.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(os.open(owner.known_hosts, flags, 0o600), "rb+") as f:
                end = f.seek(0, os.SEEK_END)
                if end:
                    f.seek(end - 1)
                    if f.read(1) != b"\n":
                        line = "\n" + line  # do not glue it to an unterminated last line
                f.write(line.encode("ascii"))  # O_APPEND: at the end, whatever the position
        client.get_host_keys().add(hostname, key.get_name(), key)
