"""`LazyPattern` (issue 20: the secret checks compile their patterns on first use): each
method answers exactly as the compiled pattern's, and compiles only once."""

from __future__ import annotations

import re

from memsync.core.lazyre import LazyPattern

TEXTS = ("", "password=hunter22 and token: x", "a_b-c.d e", "no match here", "aAbB")
PATTERNS = (r"(?P<k>\w+)[=:]\s*(?P<v>\S+)", r"[_\-.\s]+", r"(?<=[a-z])(?=[A-Z])", r"x\Z")


def test_every_method_answers_as_the_compiled_pattern() -> None:
    for source in PATTERNS:
        lazy, eager = LazyPattern(source), re.compile(source)
        assert lazy.groupindex == eager.groupindex
        for text in TEXTS:
            for pos in (0, 2):
                for name in ("search", "match", "fullmatch"):
                    got, want = getattr(lazy, name)(text, pos), getattr(eager, name)(text, pos)
                    assert (got and got.span()) == (want and want.span()), (source, text, name)
                assert [m.span() for m in lazy.finditer(text, pos)] == [
                    m.span() for m in eager.finditer(text, pos)
                ]
            assert lazy.split(text) == eager.split(text)
            assert lazy.sub(" ", text) == eager.sub(" ", text)


def test_it_compiles_once_and_only_when_used() -> None:
    lazy = LazyPattern(r"(?i)secret")
    assert lazy._compiled is None
    assert lazy.search("A SECRET") is not None  # the flags are the pattern's own
    first = lazy.compiled()
    lazy.finditer("secret")
    assert lazy.compiled() is first
