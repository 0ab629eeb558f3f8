"""`lsof -F` output (issue 23, item 1): a descriptor of the file whose access lsof does
not show is "cannot tell", never "nobody"."""

from __future__ import annotations

from memsync.local.writers import lsof


def _output(access: bytes) -> bytes:
    return b"\n".join((b"p100", b"cagent", b"f4", b"a" + access, b"D0xfe00", b"i42", b""))


def test_an_unknown_access_of_the_file_cannot_tell() -> None:
    assert lsof.parse(_output(b" "), 0xFE00, 42, own=300) is None
    assert lsof.parse(_output(b""), 0xFE00, 42, own=300) is None


def test_a_known_access_is_told() -> None:
    assert [w.pid for w in lsof.parse(_output(b"u"), 0xFE00, 42, own=300) or []] == [100]
    assert lsof.parse(_output(b"r"), 0xFE00, 42, own=300) == []
    assert lsof.parse(_output(b" "), 0xFE00, 43, own=300) == []  # another file: told
