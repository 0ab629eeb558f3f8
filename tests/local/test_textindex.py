"""`memsync.local.textindex` outside what needs FTS5 (tests/local/test_recall.py skips
itself without it)."""

from __future__ import annotations

import sqlite3

from memsync.local.textindex import fts5_available


def test_fts5_available_says_whether_an_fts5_table_can_be_made() -> None:
    """The cheap check (`fts5_source_id()`) agrees with what recall needs: a table. Here,
    not beside the recall tests: those skip themselves when it says no."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        made = True
    except sqlite3.OperationalError:
        made = False
    finally:
        db.close()
    assert fts5_available() is made
