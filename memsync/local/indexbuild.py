"""A memory file's merge index (`memsync.local.fileindex`) built by a second process
after a cold indexed merge, so that the merge costs what `merge --no-index` costs and
the next merge is steady (issue 20).

The merge (`memsync.local.merge.merge_indexed`) streams its destination; then, still
under the file's lock, `start_build` takes the build lock (`fileindex.build_lock`),
starts the builder with it, hands it the sources' cursors and the held records on its
standard input, and returns. The builder (`python -m memsync.local.indexbuild`, a fresh
interpreter: a forked child would inherit SQLite's per-process lock bookkeeping of the
parent's connection) indexes the file up to where the merge left it, and sets the
cursors and held records, in one transaction, then exits, which releases the lock.
Anyone opening the index meanwhile (`FileIndex`) waits for that lock first.

Crash safety is the index's own: one commit, with the inode and tail hash of the bytes
read. A builder killed at any instant leaves the index as the merge found it (reset if it
was stale), its cursors unmoved: the next merge reads the sources again (their old lines
duplicates) and finds the index cold again. A file replaced meanwhile (compaction) gives
an index of the old inode, which the next `refresh` finds stale.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

from memsync.local.fileindex import Cursor, FileIndex, build_lock
from memsync.local.storage import private_dirs

__all__ = ["main", "start_build"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the `memsync` package, put first on the builder's path: it runs this
same code whatever the caller's current directory."""


def start_build(
    index: FileIndex,
    stop: int,
    cursors: dict[str, Cursor],
    held: list[tuple[str, int, bytes]],
) -> int | None:
    """Start the builder of `index`: its file up to byte `stop` (of the inode there now),
    then `cursors` (source key: cursor) and `held` (source, line number, raw) replace the
    index's. The caller holds the file's lock and has written nothing to the index that
    is not committed; it may exit at once. Returns the builder's process id (None if it
    could not start), a process of its own: not this one's child, nothing to reap."""
    lock = build_lock(index.db_path)
    private_dirs(lock.parent)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        # Nobody else holds it: opening the index waited for any earlier builder, and only
        # a holder of the file's lock starts one.
        fcntl.flock(fd, fcntl.LOCK_EX)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        ino = os.stat(index.path).st_ino
        argv = [str(index.db_path), str(index.path), str(stop), str(ino)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsync.local.indexbuild", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a failed build: the next merge finds the index cold
            pass_fds=(fd,),  # the lock, held by the builder until it exits
            start_new_session=True,  # not ended by the terminal's Ctrl-C meant for the merge
            env=env,
        )
    finally:
        os.close(fd)  # not unlocked: the builder's copy of the descriptor keeps it
    doc = {
        "cursors": {k: [c.ino, c.offset, c.line, c.tail.hex()] for k, c in cursors.items()},
        "held": [[s, n, raw.hex()] for s, n, raw in held],
    }
    assert proc.stdin is not None
    assert proc.stdout is not None
    with proc.stdin, proc.stdout:
        pid = proc.stdout.readline().strip()  # the builder, once its starter forked it
        with contextlib.suppress(BrokenPipeError):  # it died: its work is lost, not ours
            proc.stdin.write(json.dumps(doc).encode())
    proc.wait()  # the starter, which exits as soon as it forked
    return int(pid) if pid.isdigit() else None


def main(argv: list[str]) -> int:
    """The builder: `DB_PATH FILE STOP INODE`, the cursors and held records on standard
    input (`start_build`); exit status 0 once the build is committed.

    It first forks and the starter exits, printing the builder's pid: the builder is then
    nobody's child to wait for (the merge that started it may be long gone)."""
    pid = os.fork()  # a fresh interpreter, one thread, no database open: safe to fork
    if pid:
        os.write(1, b"%d\n" % pid)
        return 0
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    db_path, path, stop, ino = Path(argv[0]), Path(argv[1]), int(argv[2]), int(argv[3])
    try:
        doc = json.loads(sys.stdin.buffer.read())
    except ValueError:
        doc = None  # the merge was killed while it wrote: build, but move no cursor
    with FileIndex(path, db_path, building=True) as index:
        if os.stat(path).st_ino != ino:
            return 1  # replaced since the merge (compaction): the next merge builds it

        def then() -> None:
            if doc is None:
                return
            for key, (c_ino, offset, line, tail) in doc["cursors"].items():
                index.set_cursor(key, Cursor(c_ino, offset, line, bytes.fromhex(tail)))
            index.set_held((s, n, bytes.fromhex(raw)) for s, n, raw in doc["held"])

        index.refresh(stop=stop, then=then)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
