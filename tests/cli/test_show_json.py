"""`show --json` writes runs of adjacent lines at once (issue 20): the same bytes as the
array written a line at a time, CRLF lines and all (rule 5: the objects as written)."""

from __future__ import annotations

import io

import pytest

from memsync.cli._files import _write_json_array, _write_json_runs

_RUNS: tuple[list[bytes], ...] = (
    [],
    [b'{"a": 1}\n'],
    [b'{"a": 1}\n{"b": 2}\n', b'{"c": 3}\n'],
    [b'{"a": 1}\r\n{"b": 2}\n', b'{"c":\r 3}\r\r\n{"d": 4}\n', b'{"e": 5}\n{"f": 6}\n'],
)


@pytest.mark.parametrize("runs", _RUNS)
def test_runs_are_written_as_the_lines_are(runs: list[bytes]) -> None:
    lines = [line for run in runs for line in run.split(b"\n")[:-1]]
    by_runs, by_lines = io.BytesIO(), io.BytesIO()
    _write_json_runs(by_runs, runs)
    _write_json_array(by_lines, lines)
    assert by_runs.getvalue() == by_lines.getvalue()
