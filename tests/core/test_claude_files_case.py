"""The names of memsync's files in Claude's auto-memory folder (issue 22) are distinct on
a case-insensitive file system (macOS, Windows; issue 23, item 2): two ids that differ
only in case must not share a file, or the second entry's file overwrites the first's
and the next sync reads it as Claude's edit of the first entry."""

from __future__ import annotations

from memsync.core.claude_files import OURS, file_name


def test_ids_that_differ_in_case_get_names_that_differ_casefolded() -> None:
    ids = ["pref-Python", "pref-python", "PREF-PYTHON", "01HZX3ABCD", "01hzx3abcd"]
    names = [file_name(i) for i in ids]
    assert len({n.casefold() for n in names}) == len(ids)
    assert all(OURS.match(n) for n in names)
    assert file_name("0123abcd") == "memsync_0123abcd.md"  # a lowercase id keeps its name
