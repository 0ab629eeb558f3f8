"""A memory file's merge index (`memsync.local.fileindex`) built in a second process, on
the second core, while a cold indexed merge runs in the first (issue 20).

The builder is a fresh interpreter (`python -m memsync.local.indexbuild`), not a fork: a
forked child inherits SQLite's per-process lock bookkeeping of the parent's open
connection, and opening the same database again from there is what SQLite's
documentation warns against. It opens its own connection, indexes the file up to a byte
offset in one transaction, and exits.

Crash safety is the index's own: the build commits once, with the file's inode, offset
and tail hash, so a builder killed at any instant leaves the index as it was (rolled
back), and one that outlives its merge (the merge killed) leaves an index of a prefix of
the file, which the next `refresh` validates and extends. A build that failed costs only
time: the merge's own `refresh` then reads the whole file, as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["Build", "main"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the `memsync` package, put first on the builder's path: it runs this
same code whatever the caller's current directory."""


class Build:
    """A builder process indexing `path` up to byte `stop` into the database `db_path`.

    `wait()` once the merge is done (or `stop()` if it failed): the caller then
    refreshes its own `FileIndex`, which reads only what the builder did not.
    """

    def __init__(self, path: Path, db_path: Path, stop: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "memsync.local.indexbuild", str(db_path), str(path), str(stop)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # a failed build is rebuilt by the caller, which reports
            env=env,
        )

    def wait(self) -> bool:
        """Wait for the builder; whether it committed its build."""
        return self._proc.wait() == 0

    def stop(self) -> None:
        """End the builder (its transaction is rolled back) and reap it."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()


def main(argv: list[str]) -> int:
    """The builder: `DB_PATH FILE STOP`; exit status 0 once the build is committed."""
    from memsync.local.fileindex import FileIndex

    db_path, path, stop = Path(argv[0]), Path(argv[1]), int(argv[2])
    with FileIndex(path, db_path) as index:
        index.refresh(stop=stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
