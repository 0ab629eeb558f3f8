"""`LazyPattern`: a regular expression compiled the first time it is used.

The credential checks (`memsync.core.secrets`) hold about 60 patterns; compiling them all
at import cost `memsync add` about 8 ms of its start-up (issue 20), though one entry's
text reaches only the few whose trigger words it holds. The first call of any method
compiles the pattern (once; `re` caches nothing across processes) and then binds every
method to the compiled pattern's own: the same matches, so nothing that was detected is
missed, and no Python frame between `check`'s loop over every line and the regex engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

__all__ = ["LazyPattern"]

_METHODS = ("search", "match", "fullmatch", "finditer", "split", "sub")


class LazyPattern:
    """`re.compile(pattern, flags)`, deferred: the methods of `re.Pattern[str]` the secret
    checks use (positional arguments only), each the compiled pattern's own once used."""

    __slots__ = ("_compiled", "_flags", "pattern", *_METHODS)

    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]
    split: Callable[..., list[str | Any]]
    sub: Callable[..., str]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None
        for name in _METHODS:
            setattr(self, name, partial(self._first_call, name))

    def _first_call(self, name: str, *args: Any) -> Any:
        return getattr(self.compiled(), name)(*args)

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now, the first time)."""
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self._flags)
            for name in _METHODS:
                setattr(self, name, getattr(self._compiled, name))
        return self._compiled

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled().groupindex
