"""The README's Python examples import only from `memsync`, and run (STYLE guideline 11,
like watchfiles' `tests/test_docs.py`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memsync import Memory

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(
    r"^```python\n(.*?)^```$", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL
)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.splitlines()[1][:40])
def test_readme_examples_import_only_from_memsync(block: str) -> None:
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memsync"):
            assert node.module == "memsync", ast.unparse(node)
        elif isinstance(node, ast.Import):
            assert all(not a.name.startswith("memsync.") for a in node.names), ast.unparse(node)


def test_readme_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every block, in order and in one namespace, in an empty directory with HOME there
    too (the examples name `~/...` paths). What the examples assume exists: `vm.jsonl`, the
    other machine's file the merge example reads, and the hub folder `nas/memsync` (a
    mounted share; sync refuses a missing one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    Memory.open(tmp_path / "vm.jsonl").add("fact", "The VM runs Debian.")
    (tmp_path / "nas/memsync").mkdir(parents=True)
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in BLOCKS:
        exec(compile(block, str(README), "exec"), namespace)
    out = capsys.readouterr().out
    assert "records to append" in out
    assert "True 0 " in out  # the sync report: ok, nothing pulled (the hub was empty)
    assert (tmp_path / ".local/share/agent-memory/me.jsonl").exists()
    assert "The VM runs Debian." in (tmp_path / "me.jsonl").read_text(encoding="utf-8")
    assert list((tmp_path / "nas/memsync").rglob("*.jsonl"))
