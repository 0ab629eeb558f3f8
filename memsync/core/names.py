"""Names a hub uses as path components: memory names, remote names, replica ids."""

from __future__ import annotations

import re

__all__ = ["NAME_PATTERN", "valid_name"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""1 to 64 of A-Z a-z 0-9 . _ -: no separators, so a name never climbs out of its folder."""


def valid_name(name: str) -> bool:
    """Whether `name` may be a memory folder, a file name on a hub, or a configured name:
    `NAME_PATTERN`, and neither "." nor ".." (which match it but would climb out)."""
    return name not in (".", "..") and NAME_PATTERN.fullmatch(name) is not None
