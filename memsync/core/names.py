"""Names a hub uses as path components: memory names, remote names, replica ids."""

from __future__ import annotations

import re

__all__ = ["NAME_PATTERN", "valid_name", "valid_replica", "windows_problem"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""1 to 64 of A-Z a-z 0-9 . _ -: no separators, so a name never climbs out of its folder."""


def valid_name(name: str) -> bool:
    """Whether `name` may be a memory folder, a file name on a hub, or a configured name:
    `NAME_PATTERN`, and neither "." nor ".." (which match it but would climb out)."""
    return name not in (".", "..") and NAME_PATTERN.fullmatch(name) is not None


def valid_replica(name: str) -> bool:
    """Whether `name` may be a replica id: a `valid_name` that does not start with "." (the
    hidden files a share or an OS leaves in a hub, `.hidden.jsonl`, macOS's `._laptop.jsonl`,
    are no replicas: ignored everywhere, issue 13 item 16)."""
    return valid_name(name) and not name.startswith(".")


_WINDOWS_DEVICE = re.compile(r"(?:con|prn|aux|nul|com[0-9]|lpt[0-9])(?:\..*)?", re.IGNORECASE)


def windows_problem(name: str) -> str | None:
    """Why Windows cannot hold `name` as a file or folder name, or None when it can.

    A hub folder may be read from Windows (a share, a synced folder, WSL's /mnt/c), where
    a device name (`con`, `prn`, `aux`, `nul`, `com0`-`com9`, `lpt0`-`lpt9`, in any case,
    with any extension: `con.jsonl` too) names no file, and a trailing dot or space is
    dropped (`notes.` is `notes`). The names memsync chooses (memory names, replica ids)
    avoid both; a peer's file already so named in a hub is still read where it can be."""
    if _WINDOWS_DEVICE.fullmatch(name):
        return "a device name on Windows (con, prn, aux, nul, com0-9, lpt0-9, any extension)"
    if name.endswith((".", " ")):
        return "ends with a dot or a space, which Windows drops"
    return None
