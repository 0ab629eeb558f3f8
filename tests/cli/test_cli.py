"""The command line, called as `main([...])` with capsys (STYLE guideline 11).

Exit codes: 0 success, 1 `check` found something, 2 a usage, input or I/O error. Every
error is one line `memsync: ...` on stderr, never a traceback.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.cli import main
from memsync.core.lines import Header, classify, split_complete
from memsync.core.timestamps import parse_ts

HEX12 = re.compile(r"[0-9a-f]{12}\Z")
NOW = "2026-12-01T00:00:00Z"
PEM = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU"
HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}\n'

Run = tuple[int, str, str]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Run:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def lines_of(path: Path) -> list[bytes]:
    lines, _ = split_complete(path.read_bytes())
    return lines


def last_obj(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(lines_of(path)[-1])
    return value


def entry_line(rid: str, created_at: str, text: str, **extra: Any) -> bytes:
    obj = {"id": rid, "kind": "fact", "text": text, "created_at": created_at, **extra}
    return json.dumps(obj).encode() + b"\n"


@pytest.fixture
def memfile(tmp_path: Path) -> Path:
    path = tmp_path / "m.jsonl"
    path.write_bytes(
        HEADER
        + entry_line("aaaaaaaaaaaa", "2026-11-01T00:00:00Z", "A global fact.")
        + entry_line("bbbbbbbbbbbb", "2026-11-02T00:00:00Z", "Use gh.", scope="github.com")
        + entry_line("cccccccccccc", "2026-11-03T00:00:00Z", "Use glab.", scope="gitlab.com")
        + entry_line(
            "dddddddddddd", "2026-11-04T00:00:00Z", "Short answers.", kind="preference",
            source="user",
        )
        + entry_line(
            "eeeeeeeeeeee", "2026-11-05T00:00:00Z", "Until December.",
            expires_at="2026-12-01T00:00:00Z",
        )
    )  # fmt: skip
    return path


def show_ids(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> list[str]:
    status, out, err = run(capsys, "show", *argv, "--json")
    assert status == 0, err
    return [o["id"] for o in json.loads(out)]


# add


def test_add_prints_the_new_id_and_appends_one_line(
    memfile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = lines_of(memfile)
    status, out, err = run(capsys, "add", memfile, "--kind", "lesson", "--text", "Rebase often.")
    assert (status, err) == (0, "")
    new_id = out.strip()
    assert HEX12.match(new_id)
    assert out == new_id + "\n"
    after = lines_of(memfile)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    written = last_obj(memfile)
    assert written["id"] == new_id
    assert (written["kind"], written["text"], written["scope"]) == (
        "lesson",
        "Rebase often.",
        "global",
    )
    assert (written["tags"], written["source"], written["confidence"]) == ([], None, 1.0)
    assert parse_ts(written["created_at"]) is not None


def test_add_with_every_option(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(
        capsys, "add", memfile, "--kind", "avoid", "--text", "Never force-push to main.",
        "--scope", "project:x", "--tag", "git", "--tag", "safety", "--source", "user",
        "--confidence", "0.8", "--expires-at", "2027-01-01T01:00:00+01:00",
        "--supersedes", "aaaaaaaaaaaa",
    )  # fmt: skip
    assert status == 0, err
    written = last_obj(memfile)
    assert written["id"] == out.strip()
    assert written["kind"] == "avoid"
    assert written["scope"] == "project:x"
    assert written["tags"] == ["git", "safety"]
    assert written["source"] == "user"
    assert written["confidence"] == 0.8
    assert parse_ts(written["expires_at"]) == parse_ts("2027-01-01T00:00:00Z")
    assert written["supersedes"] == "aaaaaaaaaaaa"
    assert "aaaaaaaaaaaa" not in show_ids(capsys, memfile, "--now", NOW)


def test_add_creates_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "new.jsonl"
    status, out, _ = run(capsys, "add", path, "--kind", "fact", "--text", "First.")
    assert status == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = lines_of(path)
    assert isinstance(classify(lines[0]), Header)
    assert json.loads(lines[1])["id"] == out.strip()


# forget


def test_forget_appends_a_tombstone(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "forget", memfile, "aaaaaaaaaaaa")
    assert (status, out, err) == (0, "", "")
    tomb = last_obj(memfile)
    assert tomb["id"] == "aaaaaaaaaaaa"
    assert tomb["deleted"] is True
    assert "aaaaaaaaaaaa" not in show_ids(capsys, memfile)


# show


def test_show_lists_the_live_view_in_order(
    memfile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert show_ids(capsys, memfile, "--now", "2026-11-30T00:00:00Z", "--scope", "x.example") == [
        "aaaaaaaaaaaa",
        "dddddddddddd",
        "eeeeeeeeeeee",
    ]
    status, out, _ = run(capsys, "show", memfile, "--now", "2026-11-30T00:00:00Z")
    assert status == 0
    assert "aaaaaaaaaaaa" in out
    assert "A global fact." in out
    assert "Use gh." in out  # no --scope: every scope is shown


def test_show_json_holds_the_records_exactly_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 5: the JSON array holds each record object byte for byte as its line wrote it:
    key order, spacing, escapes, timestamp spelling and unknown fields included."""
    first = (
        b'{"text":"caf\\u00e9","id":"aaaaaaaaaaaa","kind":"fact","x-extra":{"n":[1,2]},'
        b'"created_at":"2026-11-01T01:00:00+01:00"}'
    )
    second = (
        b'{ "id" : "bbbbbbbbbbbb" , "kind" : "lesson" , "text" : "two\\nlines" ,'
        b' "confidence" : 1 , "created_at" : "2026-11-02T00:00:00.000Z" }'
    )
    odd = [first, second]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(HEADER + odd[0] + b"\r\n" + odd[1] + b"\n")
    status, out, _ = run(capsys, "show", path, "--json", "--now", NOW)
    assert status == 0
    assert json.loads(out) == [json.loads(raw) for raw in odd]
    for raw in odd:
        assert raw.decode() in out


@pytest.mark.slow
def test_show_json_of_an_empty_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(HEADER)
    status, out, _ = run(capsys, "show", path, "--json")
    assert status == 0
    assert json.loads(out) == []


def test_show_scope_kind_and_now(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = "2026-11-30T00:00:00Z"
    assert show_ids(capsys, memfile, "--now", before, "--scope", "api.github.com") == [
        "aaaaaaaaaaaa",
        "bbbbbbbbbbbb",
        "dddddddddddd",
        "eeeeeeeeeeee",
    ]
    assert show_ids(capsys, memfile, "--now", before, "--kind", "preference") == ["dddddddddddd"]
    assert show_ids(capsys, memfile, "--now", before, "--kind", "preference", "--kind", "fact") == [
        "aaaaaaaaaaaa",
        "bbbbbbbbbbbb",
        "cccccccccccc",
        "dddddddddddd",
        "eeeeeeeeeeee",
    ]
    # Expiry at `now` (rule 11): eeee expires at 2026-12-01T00:00:00Z.
    assert "eeeeeeeeeeee" not in show_ids(capsys, memfile, "--now", NOW)


def test_show_several_files_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(HEADER + entry_line("aaaaaaaaaaaa", "2026-11-01T00:00:00Z", "in a"))
    b.write_bytes(
        HEADER
        + entry_line("bbbbbbbbbbbb", "2026-11-02T00:00:00Z", "in b")
        + b'{"id": "aaaaaaaaaaaa", "deleted": true, "created_at": "2026-11-03T00:00:00Z"}\n'
    )
    assert show_ids(capsys, a, b) == ["bbbbbbbbbbbb"]
    assert show_ids(capsys, b, a) == ["bbbbbbbbbbbb"]


def test_show_warns_about_bad_lines_on_stderr(
    memfile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open(memfile, "ab") as f:
        f.write(b"{not json\n")
    status, out, err = run(capsys, "show", memfile, "--json")
    assert status == 0
    assert json.loads(out)
    assert err.startswith("memsync: ")
    assert "1 bad line" in err


# prompt


def test_prompt(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "prompt", memfile, "--scope", "github.com")
    assert status == 0
    assert "A global fact." in out
    assert "Use gh." in out
    assert "Use glab." not in out
    assert out.index("Short answers.") < out.index("A global fact.")  # preferences first
    status, out, _ = run(capsys, "prompt", memfile)
    assert "Use gh." not in out
    status, out, _ = run(capsys, "prompt", memfile, "--scope", "github.com", "--max-chars", "60")
    assert status == 0
    assert 0 < len(out) <= 60


# check


def test_check_clean(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "check", memfile, "--now", NOW)
    assert status == 0
    assert out.strip() == "clean"
    status, out, _ = run(capsys, "check", memfile, "--json", "--now", NOW)
    assert status == 0
    assert json.loads(out) == {"bad": [], "twins": [], "secrets": [], "future": []}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "key"),
    [
        (b'{"id": "x", "kind": "fact", "text": 42, "created_at": "2026-11-01T00:00:00Z"}\n', "bad"),
        (
            entry_line("twtwtwtwtwtw", "2026-11-01T00:00:00Z", "zebra")
            + entry_line("twtwtwtwtwtw", "2026-11-01T00:00:00.000Z", "apple"),
            "twins",
        ),
        (entry_line("ssssssssssss", "2026-11-01T00:00:00Z", f"key {PEM}"), "secrets"),
        (entry_line("ffffffffffff", "2026-12-01T01:00:00Z", "from the future"), "future"),
    ],
    ids=["bad", "twins", "secrets", "future"],
)
def test_check_finds_each_kind_of_problem(
    memfile: Path, capsys: pytest.CaptureFixture[str], extra: bytes, key: str
) -> None:
    with open(memfile, "ab") as f:
        f.write(extra)
    status, out, _ = run(capsys, "check", memfile, "--json", "--now", NOW)
    assert status == 1
    report = json.loads(out)
    assert set(report) == {"bad", "twins", "secrets", "future"}
    assert [k for k in report if report[k]] == [key]
    item = report[key][0]
    if key in ("bad", "secrets", "future"):
        assert item["file"] == str(memfile)
        assert item["line"] == 7
    status, out, _ = run(capsys, "check", memfile, "--now", NOW)
    assert status == 1
    assert out.strip() != "clean"


def test_check_names_each_conflict_once(memfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rule 7: twins are reported once per conflict, however often a merge repeated their
    lines (rule 14): a line per key with its number of contents, and in `--json` the
    winner (rule 9) against each other content."""
    at = "2026-11-01T00:00:00Z"
    zebra, apple, mango = (entry_line("twtwtwtwtwtw", at, t) for t in ("zebra", "apple", "mango"))
    with open(memfile, "ab") as f:
        f.write(zebra + apple + zebra + apple + mango + apple)
    status, out, _ = run(capsys, "check", memfile, "--now", NOW)
    assert status == 1
    assert out.splitlines() == [
        "twins: id twtwtwtwtwtw at 2026-11-01T00:00:00.000Z has 3 different contents"
    ]
    status, out, _ = run(capsys, "check", memfile, "--json", "--now", NOW)
    pairs = [
        (json.loads(t["kept"])["text"], json.loads(t["other"])["text"])
        for t in json.loads(out)["twins"]
    ]
    assert pairs == [("zebra", "mango"), ("zebra", "apple")]


# errors


@pytest.fixture
def unsupported(tmp_path: Path) -> Path:
    path = tmp_path / "future-format.jsonl"
    path.write_bytes(b'{"format": "agent-memory/1.0", "created_at": "2026-11-01T00:00:00Z"}\n')
    return path


def _e(name: str, argv: list[str], hint: str, *marks: pytest.MarkDecorator) -> Any:
    return pytest.param(argv, hint, id=name, marks=marks)


ERRORS = [
    _e("bad-kind", ["add", "{m}", "--kind", "opinion", "--text", "t"], "opinion"),
    _e("bad-timestamp", ["add", "{m}", "--kind", "fact", "--text", "t", "--expires-at",
                         "yesterday"], "yesterday"),
    _e("naive-timestamp", ["add", "{m}", "--kind", "fact", "--text", "t", "--expires-at",
                           "2027-01-01T00:00:00"], "2027-01-01T00:00:00"),
    _e("confidence-1.5", ["add", "{m}", "--kind", "fact", "--text", "t", "--confidence", "1.5"],
       "1.5"),
    _e("confidence-word", ["add", "{m}", "--kind", "fact", "--text", "t", "--confidence",
                           "high"], "high"),
    _e("missing-text", ["add", "{m}", "--kind", "fact"], "--text"),
    _e("secret", ["add", "{m}", "--kind", "fact", "--text", f"the key: {PEM}"], "private key"),
    _e("show-missing-file", ["show", "{missing}"], "{missing}"),
    _e("prompt-missing-file", ["prompt", "{missing}"], "{missing}"),
    _e("check-missing-file", ["check", "{missing}"], "{missing}"),
    _e("forget-missing-file", ["forget", "{missing}", "aaaaaaaaaaaa"], "{missing}"),
    _e("forget-unknown-id", ["forget", "{m}", "nosuchid0000"], "nosuchid0000"),
    _e("show-bad-now", ["show", "{m}", "--now", "yesterday"], "yesterday"),
    _e("prompt-max-chars-0", ["prompt", "{m}", "--max-chars", "0"], "0"),
    _e("show-unsupported", ["show", "{u}"], "{u}"),
    _e("prompt-unsupported", ["prompt", "{u}"], "{u}"),
    _e("check-unsupported", ["check", "{u}"], "{u}"),
    _e("add-unsupported", ["add", "{u}", "--kind", "fact", "--text", "t"], "{u}"),
    _e("no-command", [], "COMMAND"),
    _e("unknown-command", ["frobnicate"], "frobnicate"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "hint"), ERRORS)
def test_errors_are_one_line_and_exit_2(
    memfile: Path,
    unsupported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    hint: str,
) -> None:
    """A usage, input or I/O error: exit 2, one `memsync: ...` line on stderr naming the
    problem, nothing on stdout, no traceback, and no file changed."""
    names = {"m": str(memfile), "u": str(unsupported), "missing": str(tmp_path / "nope.jsonl")}
    before = {p: p.read_bytes() for p in (memfile, unsupported)}
    status, out, err = run(capsys, *[a.format(**names) for a in argv])
    assert status == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memsync: ")
    assert hint.format(**names) in lines[0]
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "nope.jsonl").exists()


# entry points


@pytest.mark.slow
def test_entry_points_run() -> None:
    """`python -m memsync` and the `memsync` console script both start the CLI."""
    module = subprocess.run(
        [sys.executable, "-m", "memsync", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert module.returncode == 0, module.stderr
    assert "usage: memsync" in module.stdout
    # The script beside this interpreter: the README's test command runs without an
    # activated venv, so PATH need not hold it (issue 13, item 23).
    script = shutil.which("memsync", path=str(Path(sys.executable).parent))
    assert script is not None, "the memsync console script is not installed (pip install -e .)"
    console = subprocess.run(
        [script, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert console.returncode == 0, console.stderr
    assert console.stdout == module.stdout


@pytest.mark.parametrize("argv", [["show"], ["check"], ["check", "--json"]], ids=" ".join)
def test_a_record_dated_past_year_9999_utc_does_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "far.jsonl"
    path.write_bytes(HEADER + entry_line("farfarfarfar", "9999-12-31T23:59:59-01:00", "far"))
    status, _, err = run(capsys, argv[0], path, *argv[1:], "--now", NOW)
    assert status == (0 if argv[0] == "show" else 1), err


def test_sync_refuses_an_unknown_memory_or_remote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[[memory]]\nname = "notes"\npath = "{tmp_path / "notes.jsonl"}"\n',
        encoding="utf-8",
    )
    status, _, err = run(capsys, "sync", "--config", config, "--memory", "nope")
    assert status == 2
    assert "no memory named 'nope' in the config" in err
    status, _, err = run(capsys, "sync", "--config", config, "--remote", "nope")
    assert status == 2
    assert "no remote named 'nope' in the config" in err
    status, _, _ = run(capsys, "sync", "--config", config, "--memory", "notes")
    assert status == 0


def test_show_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13, item 7: a record's text from any replica must not drive the terminal
    (escape sequences, a title set by OSC, NUL) or fake a second record line."""
    path = tmp_path / "m.jsonl"
    text = "ok\x1b]0;pwned\x07\nb2b2b2b2b2b2  2026-11-02T00:00:00Z  fact  global  forged\x00"
    path.write_bytes(
        HEADER + entry_line("a1a1a1a1a1a1", "2026-11-01T00:00:00Z", text, scope="x\x1b[2J")
    )
    _, out, _ = run(capsys, "show", path)
    assert out.count("\n") == 1
    assert not re.search("[\x00-\x08\x0a-\x1f\x7f]", out.rstrip("\n"))
    assert "\\x1b]0;pwned\\x07\\nb2b2b2b2b2b2" in out
    assert '"x\\u001b[2J"' in out  # a scope with a control character is quoted (rule 17)


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "36501"])
def test_compact_refuses_a_horizon_past_a_hundred_years(
    memfile: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """Issue 13, item 17: `--horizon-days 1e308` gave a traceback (an overflow)."""
    status, _, err = run(capsys, "compact", memfile, "--horizon-days", value)
    assert status == 2
    assert "argument --horizon-days: must be" in err
    assert len(err.strip().splitlines()) == 1


def test_a_folder_given_as_the_memory_file_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13, item 21: a folder was "no such memory file"."""
    status, _, err = run(capsys, "show", tmp_path)
    assert status == 2
    assert f"{tmp_path}: is a folder, not a memory file" in err


def test_folders_memsync_creates_are_private(
    tmp_path: Path, memfile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13, item 20: a new `merge --into` folder (and every missing one above it) was
    0755; like the state directory, they are 0700 now."""
    for flags in ([], ["--no-index"]):
        dest = tmp_path / f"new{len(flags)}" / "deeper" / "dest.jsonl"
        status, _, err = run(capsys, "merge", memfile, "--into", dest, *flags)
        assert status == 0, err
        for folder in (dest.parent, dest.parent.parent):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_file_without_a_header_is_read_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 2: a file without a header line is still read, with a warning."""
    path = tmp_path / "bare.jsonl"
    path.write_bytes(entry_line("a1a1a1a1a1a1", "2026-11-01T00:00:00Z", "No header."))
    status, out, err = run(capsys, "show", path)
    assert status == 0
    assert "No header." in out
    assert f"{path}: no agent-memory header on its first line" in err
    _, _, err = run(capsys, "show", tmp_path / ".." / tmp_path.name / "bare.jsonl")
    assert "no agent-memory header" in err


def test_every_subcommand_and_option_says_what_it_does() -> None:
    """Issue 13, item 22: `--help` of every subcommand has a description, and every option
    and argument a help text."""
    import argparse

    from memsync.cli import _build_parser

    def bare(sub: argparse._SubParsersAction[argparse.ArgumentParser], prefix: str) -> list[str]:
        out = []
        for name, parser in sub.choices.items():
            if not parser.description:
                out.append(f"{prefix}{name}: no description")
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    out += bare(action, f"{prefix}{name} ")
                elif action.help is None:
                    out.append(f"{prefix}{name}: {'/'.join(action.option_strings) or action.dest}")
        return out

    parser = _build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert bare(sub, "") == []


def test_one_commands_parser_is_the_same_as_in_the_whole_parser() -> None:
    """Issue 20: `memsync CMD ...` builds only CMD's parser (start-up); for every command,
    what it accepts and its --help are the whole parser's, options before it included."""
    import argparse

    from memsync.cli import _build_parser

    def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(sub.choices)

    whole = commands(_build_parser())
    assert {"add", "prompt", "recall", "key", "merge-driver", "bridge"} <= set(whole)
    for name, parser in whole.items():
        one = commands(_build_parser(["-v", "--quiet", name, "--help"]))
        assert name in one, name
        assert one[name].format_help() == parser.format_help(), name
    assert len(commands(_build_parser(["add", "me.jsonl"]))) == 1
    assert commands(_build_parser(["--help"])).keys() == whole.keys()
    assert commands(_build_parser(["no-such-command"])).keys() == whole.keys()


@pytest.mark.parametrize("columns", [60, 200])
def test_help_is_formatted_at_the_terminals_width(
    columns: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parsers are built without measuring the terminal (issue 20: start-up); help
    is still formatted at its width (COLUMNS, as argparse reads it)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit):
        main(["add", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= columns - 2
    assert (max(map(len, lines)) > 60) is (columns == 200)


def test_help_says_what_now_and_scope_take(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["show", "--help"])
    out = capsys.readouterr().out
    assert "RFC 3339" in out
    assert "--scope" in out


def test_prompt_packs_what_fits_past_an_entry_too_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24, item 12: `prompt --max-chars 20000` on three short lessons (0.9) and one
    30,000-character fact (1.0) printed only "# Memory" and "4 ... left out"."""
    path = tmp_path / "m.jsonl"
    lessons = b"".join(
        entry_line(
            f"l{i}", f"2026-11-0{i + 1}T00:00:00Z", f"lesson {i}", kind="lesson", confidence=0.9
        )
        for i in range(3)
    )
    path.write_bytes(HEADER + lessons + entry_line("big", "2026-11-05T00:00:00Z", "x" * 30_000))
    status, out, _ = run(capsys, "prompt", path, "--max-chars", "20000")
    assert status == 0
    assert out == (
        "# Memory\n## Lessons\n- lesson 0\n- lesson 1\n- lesson 2\n"
        "(1 entry too long for the budget left out)\n"
    )


def test_add_supersedes_of_the_persons_entry_needs_their_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`add --supersedes ID` of an entry the person said, by an agent (no `--source
    user`), would replace nothing (rule 10 ignores it): refused before anything is
    written, as the MCP server's `supersede` is; with `--source user`, or of an agent's
    own entry, it is written and the old entry leaves the view."""
    path = tmp_path / "me.jsonl"
    assert (
        main(["add", str(path), "--kind", "preference", "--text", "Tabs.", "--source", "user"]) == 0
    )
    said = capsys.readouterr().out.strip()
    size = path.stat().st_size
    agent = ["add", str(path), "--kind", "preference", "--text", "Spaces.", "--supersedes", said]
    assert main(agent) == 2
    err = capsys.readouterr().err
    assert "person said" in err
    assert err.count("\n") == 1
    assert path.stat().st_size == size  # nothing written
    assert main([*agent, "--source", "user"]) == 0
    capsys.readouterr()
    assert main(["show", str(path), "--json"]) == 0
    assert [r["text"] for r in json.loads(capsys.readouterr().out)] == ["Spaces."]
    assert main(["add", str(path), "--kind", "fact", "--text", "Guess."]) == 0
    guess = capsys.readouterr().out.strip()
    assert (
        main(["add", str(path), "--kind", "fact", "--text", "Better.", "--supersedes", guess]) == 0
    )
