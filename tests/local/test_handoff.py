"""`memsync handoff SRC DEST`: hand a memory, or a filtered slice of it, to another agent.

DEST receives the live current versions of SRC that match the filter, SRC's tombstones and
superseding records for ids DEST already holds (whatever the filter), and nothing else;
the merge rules apply (SEMANTICS rule 14), so a second handoff appends nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsync.cli import main
from memsync.core.lines import classify, split_complete
from memsync.core.records import Record
from memsync.core.timestamps import parse_ts
from memsync.local.reading import view_of
from tests.helpers.common import JSON_KEYS

NOW = "2026-12-01T00:00:00Z"
HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}'
DEST_HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-10-01T00:00:00Z"}'


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


def entry(rid: str, day: int, kind: str = "fact", **extra: Any) -> bytes:
    obj = {
        "id": rid,
        "kind": kind,
        "text": f"{rid} on day {day}",
        "created_at": f"2026-11-{day:02d}T00:00:00Z",
        **extra,
    }
    return json.dumps(obj).encode()


def tomb(rid: str, day: int) -> bytes:
    return json.dumps(
        {"id": rid, "deleted": True, "created_at": f"2026-11-{day:02d}T00:00:00Z"}
    ).encode()


def write(path: Path, *lines: bytes, header: bytes = HEADER) -> Path:
    path.write_bytes(b"".join(raw + b"\n" for raw in [header, *lines]))
    return path


def lines_of(path: Path) -> list[bytes]:
    lines, _ = split_complete(path.read_bytes())
    return lines


def records_of(path: Path) -> list[bytes]:
    return [raw for raw in lines_of(path) if type(classify(raw)) is Record]


def live_ids(path: Path) -> list[str]:
    return [r.id for r in view_of([path], parse_ts(NOW)).records]


def handoff(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> dict[str, Any]:
    status = main(["handoff", *(str(a) for a in argv), "--now", NOW, "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


# SRC: (id, line) pairs; the lines that are the live current versions are named in LIVE.
GH_LESSON = entry("gh0000lesson", 1, "lesson", scope="github.com", confidence=0.9)
GH_API = entry("gh000000api1", 2, "fact", scope="api.github.com", confidence=0.5)
NOT_GH = entry("notgh0000001", 2, "fact", scope="notgithub.com")
PROJECT_X = entry("projectx0001", 3, "preference", scope="project:x")
PROJECT_XY = entry("projectxy001", 3, "preference", scope="project:xy")
GLOBAL = entry("global000001", 4, "avoid", confidence=0.8)
OLD = entry("versioned001", 1, "fact", scope="github.com", text="old")
NEW = entry("versioned001", 5, "fact", scope="github.com", text="new")
DELETED = entry("deleted00001", 1, "fact", scope="github.com")
DELETED_TOMB = tomb("deleted00001", 6)
SUPERSEDED = entry("superseded01", 1, "fact", scope="project:x")
SUPERSEDER = entry("superseder01", 7, "lesson", scope="global", supersedes="superseded01")
EXPIRED = entry("expired00001", 2, "fact", scope="github.com", expires_at="2026-11-20T00:00:00Z")
USER_LOW = entry("userlow00001", 8, "fact", scope="github.com", source="user", confidence=0.2)

SRC_LINES = [
    GH_LESSON, GH_API, NOT_GH, PROJECT_X, PROJECT_XY, GLOBAL, OLD, NEW, DELETED,
    DELETED_TOMB, SUPERSEDED, SUPERSEDER, EXPIRED, USER_LOW,
]  # fmt: skip
LIVE = [GH_LESSON, GH_API, NOT_GH, PROJECT_X, PROJECT_XY, GLOBAL, NEW, SUPERSEDER, USER_LOW]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = write(tmp_path / "src.jsonl", *SRC_LINES)
    assert sorted(live_ids(path)) == sorted(json.loads(raw)["id"] for raw in LIVE)
    return path


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param([], LIVE, id="everything"),
        pytest.param(["--scope", "github.com"], [GH_LESSON, GH_API, NEW, USER_LOW], id="domain"),
        pytest.param(["--scope", "api.github.com"], [GH_API], id="subdomain-only"),
        pytest.param(["--scope", "project:x"], [PROJECT_X], id="project-exact"),
        pytest.param(
            ["--scope", "project:x", "--scope", "notgithub.com"],
            [NOT_GH, PROJECT_X],
            id="scopes-repeated",
        ),
        pytest.param(
            ["--within", "github.com"], [GH_LESSON, GH_API, NEW, USER_LOW], id="within-domain"
        ),
        pytest.param(
            ["--within", "project:x", "--scope", "notgithub.com"],
            [NOT_GH, PROJECT_X],
            id="within-and-old-spelling",
        ),
        pytest.param(["--kind", "lesson"], [GH_LESSON, SUPERSEDER], id="kind"),
        pytest.param(
            ["--kind", "preference", "--kind", "avoid"],
            [PROJECT_X, PROJECT_XY, GLOBAL],
            id="kinds-repeated",
        ),
        pytest.param(
            ["--min-confidence", "0.8"],
            [GH_LESSON, NOT_GH, PROJECT_X, PROJECT_XY, GLOBAL, NEW, SUPERSEDER],
            id="min-confidence",
        ),
        pytest.param(
            ["--since", "2026-11-04T01:00:00+01:00"],
            [GLOBAL, NEW, SUPERSEDER, USER_LOW],
            id="since",
        ),
        pytest.param(
            [
                "--scope",
                "github.com",
                "--kind",
                "fact",
                "--min-confidence",
                "0.1",
                "--since",
                "2026-11-02T00:00:00Z",
            ],
            [GH_API, NEW, USER_LOW],
            id="all-filters",
        ),
    ],
)
def test_dest_gets_exactly_the_matching_live_current_versions(
    src: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    expected: list[bytes],
) -> None:
    """A domain scope takes its subdomains, `project:x` only itself; repeated `--scope` and
    `--kind` take any of them; `--min-confidence` and `--since` are lower bounds. Only live
    current versions go: no older version, no deleted, superseded or expired record."""
    dest = tmp_path / "dest.jsonl"
    doc = handoff(capsys, src, dest, *flags)
    assert set(doc) == JSON_KEYS
    assert doc["appended"] == len(expected)
    assert doc["dry_run"] is False
    assert sorted(records_of(dest)) == sorted(expected)
    assert sorted(live_ids(dest)) == sorted(json.loads(raw)["id"] for raw in expected)


def test_tombstones_reach_ids_dest_holds_whatever_the_filter(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DEST holds an id SRC deleted since: the handoff deletes it in DEST too, although the
    filter (`project:x`) would not select that record. Tombstones of ids DEST never held
    do not go."""
    dest = write(tmp_path / "dest.jsonl", DELETED, header=DEST_HEADER)
    doc = handoff(capsys, src, dest, "--scope", "project:x")
    assert doc["appended"] == 2
    assert sorted(records_of(dest)) == sorted([DELETED, DELETED_TOMB, PROJECT_X])
    assert live_ids(dest) == ["projectx0001"]


def test_superseding_records_for_ids_dest_holds_are_handed_over(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DEST holds an id that SRC superseded: the superseding record goes too, whatever the
    filter, so that the superseded id leaves DEST's view (rule 10)."""
    dest = write(tmp_path / "dest.jsonl", SUPERSEDED, header=DEST_HEADER)
    assert live_ids(dest) == ["superseded01"]
    doc = handoff(capsys, src, dest, "--kind", "avoid")
    assert doc["appended"] == 2
    assert sorted(records_of(dest)) == sorted([SUPERSEDED, SUPERSEDER, GLOBAL])
    assert "superseded01" not in live_ids(dest)


def test_a_superseder_deleted_since_still_hands_over_its_supersession(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SRC superseded an id DEST holds, then deleted the superseding entry: the
    supersession still holds (rule 10, case 008), so DEST must not keep showing the id."""
    gone = entry("superseder02", 3, supersedes="superseded01")
    src = write(tmp_path / "src.jsonl", SUPERSEDED, gone, tomb("superseder02", 4))
    dest = write(tmp_path / "dest.jsonl", SUPERSEDED, header=DEST_HEADER)
    handoff(capsys, src, dest, "--scope", "nothing.example")
    assert live_ids(dest) == []
    assert live_ids(dest) == live_ids(src)


def test_dest_already_newer_is_not_overwritten(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Merge rules apply: a version older than DEST's current one is beaten (rule 14)."""
    newest = entry("versioned001", 9, "fact", scope="github.com", text="newest")
    dest = write(tmp_path / "dest.jsonl", newest, header=DEST_HEADER)
    doc = handoff(capsys, src, dest, "--scope", "github.com")
    assert doc["beaten"] == 1
    assert NEW not in records_of(dest)
    assert newest in records_of(dest)


def test_dry_run_lists_and_changes_nothing(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = write(tmp_path / "dest.jsonl", DELETED, header=DEST_HEADER)
    before = dest.read_bytes()
    status = main(
        ["handoff", str(src), str(dest), "--scope", "project:x", "--dry-run", "--now", NOW]
    )
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert out.startswith(f"{dest}: would append 2 record(s) (")
    assert f"  + {PROJECT_X.decode()}\n" in out
    assert f"  + {DELETED_TOMB.decode()}\n" in out
    assert dest.read_bytes() == before
    doc = handoff(capsys, src, dest, "--scope", "project:x", "--dry-run")
    assert set(doc) == JSON_KEYS | {"records"}
    assert doc["dry_run"] is True
    assert sorted(doc["records"], key=json.dumps) == sorted(
        [json.loads(PROJECT_X), json.loads(DELETED_TOMB)], key=json.dumps
    )
    assert dest.read_bytes() == before
    missing = tmp_path / "missing.jsonl"
    assert handoff(capsys, src, missing, "--dry-run")["appended"] == len(LIVE)
    assert not missing.exists()


def test_json_output(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "dest.jsonl"
    doc = handoff(capsys, src, dest, "--scope", "project:x")
    assert doc == {
        "dest": str(dest),
        "appended": 1,
        "bytes_appended": len(PROJECT_X) + 1,
        "repeated": 0,
        "duplicates": 0,
        "beaten": 0,
        "held": [],
        "withheld": [],
        "bad": [],
        "twins": [],
        "dry_run": False,
    }


def test_handing_off_twice_appends_nothing(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = write(tmp_path / "dest.jsonl", DELETED, SUPERSEDED, header=DEST_HEADER)
    assert handoff(capsys, src, dest)["appended"] == len(LIVE) + 1
    after = dest.read_bytes()
    doc = handoff(capsys, src, dest)
    assert (doc["appended"], doc["bytes_appended"]) == (0, 0)
    assert dest.read_bytes() == after
    assert sorted(live_ids(dest)) == sorted(live_ids(src))


def test_handing_a_file_off_to_itself_is_refused(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = src.read_bytes()
    status = main(["handoff", str(src), str(src)])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"memsync: {src}: cannot hand a file off to itself\n"
    assert src.read_bytes() == before


def test_a_superseder_replaced_since_is_not_handed_over_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = entry("superseder03", 3, supersedes="superseded01", text="first wording")
    second = entry("superseder03", 5, text="second wording")
    src = write(tmp_path / "src.jsonl", SUPERSEDED, first, second)
    dest = write(tmp_path / "dest.jsonl", SUPERSEDED, header=DEST_HEADER)
    handoff(capsys, src, dest, "--scope", "nothing.example")
    assert "superseded01" not in live_ids(dest)
    stale = [
        r for r in view_of([dest], parse_ts(NOW)).records if r.fields()["text"] == "first wording"
    ]
    assert stale == []
