"""`memsync.Memory` on real files: create, add, forget, supersede, view, prompt, check,
the hybrid clock, torn tails, refused secrets and invalid records, incremental reads."""

from __future__ import annotations

import json
import re
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memsync import (
    CheckReport,
    Entry,
    InvalidRecord,
    Memory,
    MemsyncError,
    SecretRefused,
    Tombstone,
)
from memsync.core.lines import Header, classify, split_complete
from memsync.core.records import Record
from memsync.core.timestamps import format_ts, from_datetime, parse_ts

T = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HEX12 = re.compile(r"[0-9a-f]{12}\Z")
# Assembled here so that no credential-shaped value sits verbatim in the repository.
PEM = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU"
GITHUB_TOKEN = "ghp" + "_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def lines_of(path: Path) -> list[bytes]:
    lines, _ = split_complete(path.read_bytes())
    return lines


def obj(raw: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(raw)
    return value


def record_line(rid: str, created_at: datetime | str, text: str = "from elsewhere") -> bytes:
    stamp = created_at if isinstance(created_at, str) else format_ts(from_datetime(created_at))
    fields = {"id": rid, "kind": "fact", "text": text, "created_at": stamp}
    return json.dumps(fields).encode() + b"\n"


def append_raw(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    return Memory.open(tmp_path / "memory.jsonl", now=from_datetime(T))


# Opening


def test_open_creates_a_private_file_with_a_header(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "me.jsonl"
    Memory.open(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = lines_of(path)
    assert len(lines) == 1
    header = classify(lines[0])
    assert isinstance(header, Header)
    assert header.format == "agent-memory/0.1"
    assert path.read_bytes().endswith(b"\n")


def test_open_leaves_an_existing_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    path.write_bytes(record_line("a", T))
    Memory.open(path)
    assert path.read_bytes() == record_line("a", T)


def test_open_without_create_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Memory.open(tmp_path / "missing.jsonl", create=False)
    assert not (tmp_path / "missing.jsonl").exists()


# Writing


def test_add_appends_exactly_one_line_and_returns_the_entry(mem: Memory) -> None:
    before = mem.path.read_bytes()
    entry = mem.add(
        "preference",
        "The person prefers short answers.",
        scope="github.com",
        tags=["style", "tone"],
        source="user",
        confidence=0.75,
        expires_at="2027-01-01T00:00:00Z",
        now=T,
    )
    assert isinstance(entry, Entry)
    assert HEX12.match(entry.id)
    after = mem.path.read_bytes()
    assert after.startswith(before)
    new = after[len(before) :]
    assert new.endswith(b"\n")
    assert new.count(b"\n") == 1
    written = obj(new)
    assert written["id"] == entry.id
    assert written["kind"] == entry.kind == "preference"
    assert written["text"] == entry.text
    assert written["scope"] == "github.com"
    assert written["tags"] == ["style", "tone"]
    assert written["source"] == "user"
    assert written["confidence"] == 0.75
    assert parse_ts(written["expires_at"]) == parse_ts("2027-01-01T00:00:00Z")
    assert written["supersedes"] is None
    assert parse_ts(written["created_at"]) == from_datetime(T)
    assert entry.created_at == T
    assert entry.from_user


def test_add_defaults(mem: Memory) -> None:
    entry = mem.add("lesson", "Run the tests before pushing.", now=T)
    assert (entry.scope, entry.tags, entry.source, entry.confidence) == ("global", [], None, 1.0)
    assert (entry.expires_at, entry.supersedes) == (None, None)


def test_ids_are_new_each_time(mem: Memory) -> None:
    ids = {mem.add("fact", f"fact {i}", now=T).id for i in range(20)}
    assert len(ids) == 20
    assert all(HEX12.match(i) for i in ids)


def test_forget_appends_a_tombstone(mem: Memory) -> None:
    entry = mem.add("fact", "The build uses make.", now=T)
    before = lines_of(mem.path)
    tomb = mem.forget(entry.id, now=T + timedelta(minutes=1))
    assert isinstance(tomb, Tombstone)
    after = lines_of(mem.path)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    written = obj(after[-1])
    assert written["id"] == entry.id
    assert written["deleted"] is True
    assert parse_ts(written["created_at"]) == from_datetime(T + timedelta(minutes=1))
    assert mem.view(now=T + timedelta(hours=1)).records == []


def test_forget_an_unknown_id_is_an_error_and_writes_nothing(mem: Memory) -> None:
    before = mem.path.read_bytes()
    with pytest.raises(MemsyncError, match="nosuchid"):
        mem.forget("nosuchid", now=T)
    assert mem.path.read_bytes() == before


def test_supersede_replaces_an_id_for_good(mem: Memory) -> None:
    old = mem.add("avoid", "Do not use tabs.", now=T)
    new = mem.supersede(old.id, "Do not use tabs in Python files.", now=T + timedelta(seconds=1))
    assert new.supersedes == old.id
    assert new.kind == "avoid"  # the old entry's kind
    assert new.id != old.id
    assert [r.id for r in mem.view(now=T + timedelta(hours=1)).records] == [new.id]


def test_supersede_an_unknown_id_is_an_error(mem: Memory) -> None:
    before = mem.path.read_bytes()
    with pytest.raises(MemsyncError):
        mem.supersede("nosuchid", "text", now=T)
    assert mem.path.read_bytes() == before


# Reading


def test_view_is_ordered_and_honours_expiry(mem: Memory) -> None:
    a = mem.add("fact", "first", now=T)
    b = mem.add("fact", "second", now=T + timedelta(seconds=1), expires_at=T + timedelta(days=1))
    view = mem.view(now=T + timedelta(hours=1))
    assert [r.id for r in view.records] == [a.id, b.id]
    assert [e.text for e in view.entries] == ["first", "second"]
    assert view.bad == []
    assert [r.id for r in mem.view(now=T + timedelta(days=1)).records] == [a.id]
    assert len(mem.view(now=from_datetime(T + timedelta(hours=1)))) == 2  # `now` as an int


def test_to_prompt(mem: Memory) -> None:
    mem.add("preference", "Short answers.", source="user", now=T)
    mem.add("lesson", "Use gh for GitHub.", scope="github.com", now=T)
    mem.add("lesson", "Use glab for GitLab.", scope="gitlab.com", now=T)
    out = mem.to_prompt(scope="api.github.com", now=T)
    assert "Short answers." in out
    assert "Use gh for GitHub." in out
    assert "glab" not in out
    assert "gh for GitHub" not in mem.to_prompt(now=T)
    small = mem.to_prompt(scope="github.com", max_chars=40, now=T)
    assert len(small) <= 40


def test_check_of_a_clean_file(mem: Memory) -> None:
    mem.add("fact", "A clean fact.", now=T)
    report = mem.check(now=T)
    assert isinstance(report, CheckReport)
    assert report.clean
    assert report.to_json() == {"bad": [], "twins": [], "secrets": [], "future": []}


def test_check_finds_bad_lines_twins_secrets_and_future_records(mem: Memory) -> None:
    append_raw(mem.path, b'{"id": "x", "kind": "opinion"}\n')  # line 2: bad
    append_raw(mem.path, record_line("tw", T, "zebra") + record_line("tw", T, "apple"))  # 3-4
    append_raw(mem.path, record_line("s", T, f"The deploy key is {PEM}"))  # line 5
    append_raw(mem.path, record_line("f", T + timedelta(hours=1)))  # line 6: 1 h ahead
    report = mem.check(now=T)
    assert not report.clean
    assert [(b.file, b.line) for b in report.bad] == [(str(mem.path), 2)]
    assert [(a.id, json.loads(a.raw)["text"]) for a, _ in report.twins] == [("tw", "zebra")]
    assert [(s.line, s.what) for s in report.secrets] == [(5, "private key block")]
    assert [(f, n, r.id) for f, n, r in report.future] == [(str(mem.path), 6, "f")]


def test_check_finds_a_secret_whatever_the_json_escaping(mem: Memory) -> None:
    """The verdict is on the text a reader sees, not on how the JSON spelled it."""
    text = "The db is postgres://admin:S3cr3tPassw0rd@db.example.com/app"
    line = json.dumps(
        {"id": "esc", "kind": "fact", "text": text, "created_at": "2026-11-01T12:00:00Z"}
    )
    append_raw(mem.path, line.replace("/", "\\/").encode() + b"\n")
    assert [s.what for s in mem.check(now=T).secrets] == ["password in URL"]


# The hybrid clock


def test_forget_beats_a_record_from_a_clock_that_runs_ahead(mem: Memory) -> None:
    """A record of X dated 1 hour in our future (its machine's clock is ahead, or ours is
    behind): `forget(X)` must still be later, or the delete would silently lose (rule 8)."""
    ahead = T + timedelta(hours=1)
    append_raw(mem.path, record_line("xxxxxxxxxxxx", ahead))
    tomb = mem.forget("xxxxxxxxxxxx", now=T)
    assert tomb.created_at > ahead
    assert all(r.id != "xxxxxxxxxxxx" for r in mem.view(now=T + timedelta(hours=2)).records)


def test_the_stamps_second_scan_reads_only_what_was_appended_since_the_first(mem: Memory) -> None:
    """Issue 20: `forget` scans the file once; the stamp's scan under the lock reads only
    the bytes appended since, yet sees a record of the id written there meanwhile (a
    lock-free writer), and reads the whole file again when it was replaced."""
    rid = "xxxxxxxxxxxx"
    append_raw(mem.path, record_line(rid, T))
    seen = mem._newest_of(rid)
    assert seen.newest == from_datetime(T)
    assert seen.end == mem.path.stat().st_size
    ahead = T + timedelta(hours=1)
    append_raw(mem.path, record_line(rid, ahead))
    again = mem._newest_of(rid, seen)
    assert again.newest == from_datetime(ahead)
    # A file put in its place (a compaction: another inode) holding a newer record of the
    # id before the offset read to: read from the start.
    later = T + timedelta(hours=2)
    replacement = mem.path.with_name("other.jsonl")
    replacement.write_bytes(mem.path.read_bytes())
    append_raw(replacement, record_line(rid, later))
    lines = replacement.read_bytes().splitlines(keepends=True)
    replacement.write_bytes(b"".join([lines[0], lines[-1], *lines[1:-1]]))
    replacement.replace(mem.path)
    assert mem._newest_of(rid, again).newest == from_datetime(later)
    tomb = mem.forget(rid, now=T)
    assert tomb.created_at > later


def test_forget_beats_a_record_far_in_the_future(mem: Memory) -> None:
    """Even beyond the 24 h bound, a tombstone of X is stamped after X's newest record."""
    far = T + timedelta(days=2)
    append_raw(mem.path, record_line("xxxxxxxxxxxx", far))
    tomb = mem.forget("xxxxxxxxxxxx", now=T)
    assert tomb.created_at > far
    assert mem.view(now=T + timedelta(days=3)).records == []


def test_a_clock_stepped_back_does_not_reorder_our_writes(mem: Memory) -> None:
    first = mem.add("fact", "first", now=T)
    second = mem.add("fact", "second", now=T - timedelta(minutes=10))
    assert second.created_at >= first.created_at


def test_a_record_beyond_24_hours_does_not_drag_new_stamps(mem: Memory) -> None:
    """One broken clock must not pull every later write into the future."""
    append_raw(mem.path, record_line("broken-clock", T + timedelta(days=2)))
    entry = mem.add("fact", "now", now=T)
    assert entry.created_at == T


def test_a_record_within_24_hours_ahead_is_followed(mem: Memory) -> None:
    """The newest stamp near the end of the file is a floor (clocks step backwards)."""
    ahead = T + timedelta(hours=1)
    append_raw(mem.path, record_line("peer", ahead))
    entry = mem.add("fact", "after the peer", now=T)
    assert entry.created_at >= ahead


# Torn tails, refusals


def test_append_after_a_torn_last_line_terminates_it_first(mem: Memory) -> None:
    """Rule 1: a torn fragment stays its own bad line; the new record is whole and valid."""
    mem.add("fact", "before", now=T)
    torn = b'{"id": "torn00000000", "kind": "fa'
    append_raw(mem.path, torn)
    assert mem.check(now=T).bad == []  # a torn last line is a write in progress, not bad
    entry = mem.add("fact", "after", now=T + timedelta(seconds=1))
    lines = lines_of(mem.path)
    assert mem.path.read_bytes().endswith(b"\n")
    assert lines[-2] == torn
    rec = classify(lines[-1])
    assert isinstance(rec, Record)
    assert rec.id == entry.id
    bad = mem.check(now=T + timedelta(seconds=1)).bad
    assert [b.line for b in bad] == [len(lines) - 1]
    texts = [e.text for e in mem.view(now=T + timedelta(hours=1)).entries]
    assert texts == ["before", "after"]


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"text": f"The deploy key is {PEM}"}, "private key block"),
        ({"text": f"Use token {GITHUB_TOKEN} for the bot."}, "GitHub token"),
        ({"text": "An ordinary fact.", "tags": [GITHUB_TOKEN]}, "GitHub token"),
    ],
    ids=["pem-in-text", "token-in-text", "token-in-tag"],
)
def test_secrets_are_refused_and_nothing_is_written(
    mem: Memory, kwargs: dict[str, Any], what: str
) -> None:
    before = mem.path.read_bytes()
    with pytest.raises(SecretRefused) as info:
        mem.add("fact", now=T, **kwargs)
    assert what in str(info.value)
    assert mem.path.read_bytes() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "opinion"},
        {"confidence": 1.5},
        {"confidence": -0.5},
        {"confidence": float("nan")},
        {"expires_at": "tomorrow"},
        {"expires_at": "2027-01-01T00:00:00"},
    ],
    ids=repr,
)
def test_invalid_records_are_refused_and_nothing_is_written(
    mem: Memory, kwargs: dict[str, Any]
) -> None:
    before = mem.path.read_bytes()
    fields: dict[str, Any] = {"kind": "fact", "text": "A fact.", **kwargs}
    with pytest.raises(InvalidRecord):
        mem.add(fields.pop("kind"), fields.pop("text"), now=T, **fields)
    assert mem.path.read_bytes() == before


# Incremental reads


def test_read_from_returns_complete_lines_and_resumes_after_a_torn_tail(mem: Memory) -> None:
    mem.add("fact", "one", now=T)
    lines, offset = mem.read_from(0)
    assert lines == lines_of(mem.path)
    assert offset == mem.path.stat().st_size

    assert mem.read_from(offset) == ([], offset)
    full = record_line("late", T, "arrives in two writes")
    append_raw(mem.path, full[:25])
    assert mem.read_from(offset) == ([], offset)  # the torn tail waits
    append_raw(mem.path, full[25:])
    lines, new_offset = mem.read_from(offset)
    assert lines == [full.rstrip(b"\n")]
    assert new_offset == mem.path.stat().st_size
    assert mem.read_from(new_offset) == ([], new_offset)


# A full disk (issue 13, item 14)

_FULL_DISK_CHILD = """
import resource, signal, sys
from memsync import Memory
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a short write instead of a kill
path, limit = sys.argv[1], int(sys.argv[2])
mem = Memory.open(path)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    mem.add("lesson", "a record that does not fit on the disk " * 4)
except OSError as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.slow
def test_an_append_that_does_not_fit_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A short write (here a file size limit, as a full disk does) used to leave a partial
    record that the next append turned into a permanent bad line. Now the file is cut back
    to its old size, the error names the file, and the next append is clean."""
    import subprocess
    import sys

    path = tmp_path / "me.jsonl"
    mem = Memory.open(path)
    mem.add("fact", "already here")
    before = path.read_bytes()
    child = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, str(path), str(len(before) + 40)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 3, child.stderr
    assert str(path) in child.stdout
    assert path.read_bytes() == before
    mem.add("fact", "after the disk was freed")
    assert mem.check().clean


def test_to_prompt_on_an_unchanged_file_is_served_from_the_cache(tmp_path: Path) -> None:
    """Issue 14: an agent's process asks for its block again and again; while the file is
    unchanged nothing is read or rendered again (the very same string comes back), and an
    append or an expiry shows at the next call."""
    from memsync.local.livecache import live_cache

    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "First.")
    soon = datetime.now(UTC) + timedelta(seconds=1)
    mem.add("fact", "Expires in a second.", expires_at=soon)
    first = mem.to_prompt()
    cache = live_cache(mem.path)
    read = cache.bytes_read
    assert mem.to_prompt() is first
    assert cache.bytes_read == read
    assert Memory(mem.path).to_prompt() is first  # another handle, the same process cache

    mem.add("fact", "Second.")
    grown = mem.to_prompt()
    assert "- Second." in grown
    assert "- Expires in a second." in grown
    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.01)
    assert "Expires in a second." not in mem.to_prompt()
    assert mem.to_prompt() == mem.to_prompt(now=datetime.now(UTC))
