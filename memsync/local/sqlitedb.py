"""The SQLite databases memsync keeps in the state directory (the merge index, recall's
full-text index): opened private, with SQLite's errors as an `OSError` naming the file.

SQLite's own errors name no file ("database or disk is full", "disk I/O error"), and the
CLI would have shown them as a traceback (issue 13, item 21). Each is translated where
it is raised, so that every caller (the CLI, the daemon's pass, the MCP server) sees an
`OSError` it already handles, with the database's path as its `filename`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memsync.local.netfs import on_network_fs
from memsync.local.storage import private_dirs

__all__ = ["connect", "state_db_error"]


def state_db_error(db_path: str | Path, exc: sqlite3.Error) -> OSError:
    """An `OSError` naming `db_path` for SQLite's `exc`; a full disk is ENOSPC, said plainly
    (SQLite reports it as SQLITE_FULL or, when the journal cannot grow, as an I/O error)."""
    text = str(exc) or type(exc).__name__
    code = errno.EIO
    with contextlib.suppress(OSError):
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or (
            os.statvfs(Path(db_path).parent).f_bavail == 0
        ):
            code, text = errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({text})"
    return OSError(code, text, str(db_path))


class _Connection(sqlite3.Connection):
    """A connection whose statements raise `state_db_error` instead of `sqlite3.Error`."""

    db_path = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise state_db_error(self.db_path, exc) from exc

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            raise state_db_error(self.db_path, exc) from exc

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.Error as exc:
            raise state_db_error(self.db_path, exc) from exc


def connect(
    db_path: Path, *, timeout: float = 5.0, check_same_thread: bool = True
) -> sqlite3.Connection:
    """Open (or create) the database `db_path`: its folder 0700, the file 0600 before the
    write-ahead log exists (SQLite gives the log the same mode), WAL mode (a rollback
    journal on a network filesystem, where WAL's shared memory cannot work), autocommit
    (`isolation_level=None`: the callers say BEGIN and COMMIT themselves). `timeout` is
    how long a statement waits for another process's lock (SQLite's busy timeout).

    Raises:
        OSError: naming `db_path`, for any SQLite error here or in a later statement.
    """
    private_dirs(db_path.parent)
    try:
        db = sqlite3.connect(
            db_path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=check_same_thread,
            factory=_Connection,
        )
    except sqlite3.Error as exc:
        raise state_db_error(db_path, exc) from exc
    assert isinstance(db, _Connection)
    db.db_path = str(db_path)
    os.chmod(db_path, 0o600)
    if on_network_fs(db_path.parent):  # a home or state dir on NFS/SMB (issue 23)
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("PRAGMA synchronous=FULL")
    else:
        _write_ahead(db)
        db.execute("PRAGMA synchronous=NORMAL")
    return db


def _write_ahead(db: sqlite3.Connection) -> None:
    """Switch `db` to write-ahead logging. While another connection (another pass of the
    daemon, another process) sets up the same file, SQLite answers "database is locked" at
    once, without waiting its busy timeout: that lasts milliseconds, so try again (5 s)."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except OSError as exc:  # `state_db_error`'s translation of SQLite's error
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
