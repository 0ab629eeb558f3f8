"""`LazyPattern`: a regular expression compiled the first time it is used.

The credential checks (`memsync.core.secrets`) hold about 60 patterns; compiling them all
at import cost `memsync add` about 8 ms of its start-up (issue 20), though one entry's
text reaches only the few whose trigger words it holds. Each method compiles on first
use (once; `re` itself caches nothing across processes) and then behaves exactly as the
compiled pattern's: the same matches, so nothing that was detected is missed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["LazyPattern"]


class LazyPattern:
    """`re.compile(pattern, flags)`, deferred: the subset of `re.Pattern[str]`'s methods
    the secret checks use, each the compiled pattern's own."""

    __slots__ = ("_compiled", "_flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now, the first time)."""
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self._flags)
        return self._compiled

    @property
    def groupindex(self) -> Mapping[str, int]:
        return (self._compiled or self.compiled()).groupindex

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).fullmatch(string, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return (self._compiled or self.compiled()).finditer(string, pos, endpos)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return (self._compiled or self.compiled()).split(string, maxsplit)

    def sub(self, repl: str, string: str, count: int = 0) -> str:
        return (self._compiled or self.compiled()).sub(repl, string, count)
