"""Names a hub uses as path components: memory names, remote names, replica ids."""

from __future__ import annotations

import re

__all__ = ["NAME_PATTERN", "valid_name", "valid_replica"]

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
