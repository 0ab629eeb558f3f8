"""The in-process floor of a merge (issue 14): read a memory file, digest every line into a
set, print how many distinct lines. No parsing, no view, no lock, no output file.

    python benchmarks/floor.py benchmarks/data/m1m.jsonl

8 MiB reads, the lines split with `bytes.split`, each line digested to 128 bits: xxhash's
xxh3_128 when it is installed (memsync's own line digest, `core.scan.line_digest`), else
hashlib's blake2b with a 16-byte digest. `bench_round.py` times it as the `floor` baseline.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from hashlib import blake2b

BLOCK = 8 * 1024 * 1024


def _blake2b(line: bytes) -> bytes:
    return blake2b(line, digest_size=16).digest()


def digest_function() -> tuple[str, Callable[[bytes], object]]:
    """The fastest 128-bit line digest available here, and its name."""
    try:
        import xxhash
    except ImportError:
        return "blake2b-128", _blake2b
    return "xxh3_128", xxhash.xxh3_128_intdigest


def distinct_lines(path: str, digest: Callable[[bytes], object]) -> int:
    """How many distinct non-empty lines `path` holds, by their digests."""
    seen: set[object] = set()
    rest = b""
    with open(path, "rb", buffering=0) as f:
        while block := f.read(BLOCK):
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            seen.update(map(digest, lines))
    if rest:
        seen.add(digest(rest))
    seen.discard(digest(b""))
    return len(seen)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/floor.py FILE")
    name, digest = digest_function()
    print(f"{distinct_lines(sys.argv[1], digest)} distinct lines ({name})")


if __name__ == "__main__":
    main()
