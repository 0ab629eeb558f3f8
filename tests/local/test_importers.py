"""`memsync import --from mcp-memory` on hostile source files: one line and exit 2, never a
traceback (issue 24, item 13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync import Memory
from memsync.cli import main

_GOOD = {"type": "entity", "name": "ci", "entityType": "system", "observations": ["runs nightly"]}


def _import(src: Path, into: Path) -> int:
    return main(["import", "--from", "mcp-memory", str(src), str(into)])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deep to read"),
        (
            b'{"type":"entity","name":"caf\xe9","entityType":"x","observations":[]}',
            "not UTF-8 (byte 0xe9 at column 29)",
        ),
        (
            b'{"type":"entity","name":"a","entityType":"x","observations":["ok \\ud800"]}',
            "key 'observations[0]' holds a lone surrogate (not Unicode text)",
        ),
        (
            b'{"type":"relation","from":"\\udfff","to":"b","relationType":"knows"}',
            "key 'from' holds a lone surrogate (not Unicode text)",
        ),
    ],
    ids=["nested-100000-deep", "latin-1-byte", "lone-surrogate", "lone-surrogate-in-a-name"],
)
def test_a_hostile_line_is_one_message_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], second_line: bytes, message: str
) -> None:
    src, into = tmp_path / "memory.jsonl", tmp_path / "me.jsonl"
    src.write_bytes(json.dumps(_GOOD).encode() + b"\n" + second_line + b"\n")
    assert _import(src, into) == 2
    captured = capsys.readouterr()
    assert captured.err == f"memsync: {src}:2: {message}\n"
    assert captured.out == ""
    assert not into.exists() or Memory.open(into).view().records == []


def test_a_byte_order_mark_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, into = tmp_path / "memory.jsonl", tmp_path / "me.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + json.dumps(_GOOD).encode() + b"\r\n")
    assert _import(src, into) == 0
    assert capsys.readouterr().out == f"{into}: appended 1 entry; 0 already there\n"
    assert [e.text for e in Memory.open(into).view().entries] == ["runs nightly"]


def test_a_byte_order_mark_later_in_the_file_is_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, into = tmp_path / "memory.jsonl", tmp_path / "me.jsonl"
    src.write_bytes(json.dumps(_GOOD).encode() + b"\n\xef\xbb\xbf" + json.dumps(_GOOD).encode())
    assert _import(src, into) == 2
    assert capsys.readouterr().err.startswith(f"memsync: {src}:2: not JSON (")
