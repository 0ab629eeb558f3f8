"""The shared conformance cases (`shared/conformance/cases/`), through the CLI's code path.

Each case is run as a user runs it: `memsync show FILE... --now NOW --json` and
`memsync check FILE... --json --now NOW` via `memsync.cli.main`. Then the view must not
depend on how the same lines are laid out: shuffled and split over 1 to 3 files, or
concatenated into one file in any order (SEMANTICS: "the view is a function of the set of
records and `now`, never of line order").
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memsync.cli import main
from memsync.core.lines import classify, split_complete
from memsync.core.records import Record
from memsync.core.timestamps import parse_ts
from tests.helpers.paths import SHARED

CASES_DIR = SHARED / "conformance" / "cases"
CASE_DIRS = sorted(p for p in CASES_DIR.iterdir() if p.is_dir()) if CASES_DIR.is_dir() else []

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}'
SEEDS = (1, 2, 3, 4)

ViewKey = list[tuple[str, int, str]]


@dataclass(frozen=True)
class Case:
    name: str
    folder: Path
    now: str
    inputs: list[str]
    error: str | None
    live: list[dict[str, str]]
    bad: list[tuple[str, int]]

    @property
    def files(self) -> list[Path]:
        return [self.folder / name for name in self.inputs]


def load_case(folder: Path) -> Case:
    doc: dict[str, Any] = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    return Case(
        name=folder.name,
        folder=folder,
        now=doc["now"],
        inputs=list(doc["inputs"]),
        error=doc["error"],
        live=list(doc["live"]),
        bad=[(str(f), int(n)) for f, n in doc["bad"]],
    )


def instant(text: str) -> int:
    us = parse_ts(text)
    assert us is not None, f"not an RFC 3339 timestamp: {text!r}"
    return us


def expected_view(case: Case) -> ViewKey:
    return [(e["id"], instant(e["created_at"]), e["text"]) for e in case.live]


def show_json(capsys: pytest.CaptureFixture[str], files: list[Path], now: str) -> ViewKey:
    """`memsync show FILE... --now NOW --json`, as (id, instant, text) of each live record."""
    status = main(["show", *map(str, files), "--now", now, "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "Traceback" not in err
    objs: list[dict[str, Any]] = json.loads(out)
    return [(o["id"], instant(o["created_at"]), o["text"]) for o in objs]


def check_json(capsys: pytest.CaptureFixture[str], files: list[Path], now: str) -> dict[str, Any]:
    """`memsync check FILE... --json --now NOW`; its exit status must match its findings."""
    status = main(["check", *map(str, files), "--json", "--now", now])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    report: dict[str, Any] = json.loads(out)
    assert set(report) == {"bad", "twins", "secrets", "future"}
    found = any(report[k] for k in report)
    assert status == (1 if found else 0), (status, report)
    return report


def record_lines(case: Case) -> list[bytes]:
    """Every complete line of the case's inputs that is a valid record (CRLF kept)."""
    out: list[bytes] = []
    for path in case.files:
        lines, _ = split_complete(path.read_bytes())
        out += [raw for raw in lines if isinstance(classify(raw), Record)]
    return out


CASES = [load_case(p) for p in CASE_DIRS]
VIEW_CASES = [pytest.param(c, id=c.name) for c in CASES if c.error is None]
ERROR_CASES = [pytest.param(c, id=c.name) for c in CASES if c.error is not None]


@pytest.mark.parametrize("case", VIEW_CASES)
def test_show_gives_the_expected_view(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """`memsync show --json` lists exactly the case's live records, in order (rule 12)."""
    assert show_json(capsys, case.files, case.now) == expected_view(case)


@pytest.mark.parametrize("case", VIEW_CASES)
def test_check_reports_the_expected_bad_lines(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memsync check --json` reports every bad line by file and line number, and no other
    (rule 4); torn last lines and blank lines are not bad (rules 1, 3)."""
    report = check_json(capsys, case.files, case.now)
    got = [(Path(b["file"]).name, b["line"]) for b in report["bad"]]
    assert got == case.bad
    assert all(b["reason"] for b in report["bad"])


@pytest.mark.parametrize("command", ["show", "check"])
@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_cases_fail_cleanly(
    case: Case, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unsupported format is refused (rule 2): exit 2, one `memsync: ` line on stderr
    naming the file, no traceback, nothing on stdout."""
    assert case.error == "unsupported-format"
    status = main([command, *map(str, case.files), "--now", case.now, "--json"])
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memsync: ")
    assert any(name in lines[0] for name in case.inputs)


def test_cases_are_found() -> None:
    """The suite must not pass vacuously when the shared folder is missing or moved."""
    assert VIEW_CASES, f"no conformance cases under {CASES_DIR} (set MEMSYNC_SHARED?)"
    assert ERROR_CASES, "no error case: the unsupported-format path goes untested"


def _write_split(
    folder: Path, lines: list[bytes], rng: random.Random, header_mode: str
) -> list[Path]:
    """Write `lines` (already shuffled) over 1 to 3 files, with headers as `header_mode` says:
    "none", "first" (line 1 of each file) or "anywhere" (also at random places, rule 2)."""
    folder.mkdir()
    n_files = rng.randint(1, 3)
    cuts = sorted(rng.randint(0, len(lines)) for _ in range(n_files - 1))
    parts = [lines[a:b] for a, b in itertools.pairwise([0, *cuts, len(lines)])]
    paths = []
    for i, part in enumerate(parts):
        body = list(part)
        if header_mode == "anywhere":
            for _ in range(rng.randint(1, 3)):
                body.insert(rng.randint(0, len(body)), HEADER)
        if header_mode in ("first", "anywhere"):
            body.insert(0, HEADER)
        if rng.random() < 0.5:
            body.insert(rng.randint(0, len(body)), b"")  # a blank line is skipped (rule 3)
        path = folder / f"part{i}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in body))
        paths.append(path)
    return paths


@pytest.mark.parametrize("case", VIEW_CASES)
def test_view_ignores_line_order_and_file_split(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The valid lines of all inputs, shuffled and split differently over 1 to 3 files
    (headers left out, first, or anywhere), give the same view."""
    lines = record_lines(case)
    want = expected_view(case)
    for seed in SEEDS:
        rng = random.Random(seed)
        shuffled = lines[:]
        rng.shuffle(shuffled)
        mode = ("none", "first", "anywhere")[seed % 3]
        files = _write_split(tmp_path / f"seed{seed}", shuffled, rng, mode)
        assert show_json(capsys, files, case.now) == want, f"seed {seed}, headers {mode}"


@pytest.mark.parametrize("case", VIEW_CASES)
def test_view_of_concatenated_inputs(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All inputs merged into one file by concatenation, in every order, give the same view
    (rule 2: the second header is skipped). A torn last line is terminated first, as a
    writer does before appending (rule 1), so it stays its own bad line."""
    want = expected_view(case)
    blobs = [p.read_bytes() for p in case.files]
    for n, order in enumerate(itertools.permutations(range(len(blobs)))):
        data = b""
        for i in order:
            if data and not data.endswith(b"\n"):
                data += b"\n"
            data += blobs[i]
        path = tmp_path / f"cat{n}.jsonl"
        path.write_bytes(data)
        assert show_json(capsys, [path], case.now) == want, f"order {order}"


def test_check_reports_every_bad_line_of_case_020(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's "Done when": `memsync check` lists each bad line of case 020 with its
    line number and a reason, in JSON and in the text a person reads."""
    folder = CASES_DIR / "020-bad-lines"
    c = load_case(folder)
    path = c.files[0]
    report = check_json(capsys, [path], c.now)
    assert [(b["file"], b["line"]) for b in report["bad"]] == [(str(path), n) for n in range(3, 13)]
    assert all(isinstance(b["reason"], str) and b["reason"] for b in report["bad"])

    status = main(["check", str(path), "--now", c.now])
    out, _ = capsys.readouterr()
    assert status == 1
    for n in range(3, 13):
        assert f"{path}:{n}:" in out
    assert f"{path}:2:" not in out
    assert f"{path}:13:" not in out
