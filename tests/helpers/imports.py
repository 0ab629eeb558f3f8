"""What a command imports: the start-up promises of `tests/test_architecture.py` (issues 14
and 20) run the command line in a fresh interpreter and list the heavy modules it loaded."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

HEADER = '{"format": "agent-memory/0.1", "created_at": "2026-01-01T00:00:00Z"}\n'


def modules_loaded(heavy: Iterable[str], *statements: str) -> list[str]:
    """The modules of `heavy` a fresh interpreter holds after `statements` (Python, run
    with `sys` and the command line's `main` imported), sorted."""
    code = "import sys\nfrom memsync.cli import main\n" + "".join(f"{s}\n" for s in statements)
    code += f"print(sorted(set({sorted(heavy)!r}) & set(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    found: list[str] = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    return found


def large_memory(path: Path, word: str = "Entry") -> Path:
    """A memory of 1,500 entries (over `foldcheck.MIN_BYTES`: a file that gets a store),
    each text starting with `word`."""
    body = "".join(
        f'{{"id": "e{i:05d}", "kind": "fact", "text": "{word} {i} {"x" * 200}", '
        f'"created_at": "2026-01-01T00:00:00Z", "confidence": 0.{i % 9 + 1}}}\n'
        for i in range(1500)
    )
    path.write_text(HEADER + body)
    return path
