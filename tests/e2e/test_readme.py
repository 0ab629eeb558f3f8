"""The README's Python examples import only from `memsync`, and run (STYLE guideline 11,
like watchfiles' `tests/test_docs.py`)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memsync import Memory
from tests.helpers.paths import README

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


def _sh_block_after(heading: str) -> str:
    """The first ```sh block after the line `heading` of the README."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    found = re.search(r"^```sh\n(.*?)^```$", text[start:], re.MULTILINE | re.DOTALL)
    assert found is not None, heading
    return found.group(1)


def _readme_env(home: Path) -> dict[str, str]:
    """A new user's shell: HOME of its own, nothing memsync reads set, and `memsync` on PATH
    as the README says to have it (the venv's bin folder: `. .venv/bin/activate`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSYNC_", "XDG_", "SSH_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_tour_runs_as_pasted(tmp_path: Path) -> None:
    """Issue 13, item 23: the tour, pasted in order into bash by a new user. `forget` took
    an id that was never added and `compact` found the file busy (exit 3), `merge` read
    files that did not exist. Every line works now, except what the tour says does not
    yet: `sync` without a config says where to put one, `status` exits 1 with no daemon."""
    tour = _sh_block_after("## A short tour of the command line")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    statuses = tmp_path / "statuses"
    commands = [c for c in tour.replace("\\\n", "").splitlines() if c.strip()]
    script = "".join(f'{c}\necho "$?" >> {statuses}\n' for c in commands)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=_readme_env(home),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    codes = dict(zip(commands, map(int, statuses.read_text().split()), strict=True))
    expected_failures = {"memsync status": 1}
    for command, code in codes.items():
        words = " ".join(command.split()[:2])
        assert code == expected_failures.get(words, 0), (command, done.stderr)
    # sync runs the daemon's embedded default (issue 24, item 17): nothing to sync yet.
    assert "nothing to sync: no remote is configured" in done.stdout
    assert "running on the embedded default" in done.stdout
    memory = home / ".local/share/agent-memory/me.jsonl"
    view = subprocess.run(
        [Path(sys.executable).parent / "memsync", "show", memory, "--json"],
        env=_readme_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(view.stdout)
    assert [e["kind"] for e in shown] == ["preference"]  # the lesson was forgotten
    assert "The harbor site" in (work / "other-agent.jsonl").read_text(encoding="utf-8")
