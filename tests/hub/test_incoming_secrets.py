"""Issue 13, item 6: records that arrive by merge, sync or the daemon are scanned for
credentials in every human-written string (text, scope, source, tags, unknown fields,
nested or not), before they are merged or pushed.

The policy (README, "Secrets"): such a record is withheld: neither merged here nor pushed
from here, reported with its file, line, id and what it looks like (never the value), in
the sync or merge output, the daemon's log, and `memsync status` as a problem. It stays
where it was written, for its author to forget; everything else syncs on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.core.secrets import record_secrets
from memsync.core.timestamps import SECOND
from memsync.daemon.status import DaemonStatus, MemoryStatus, RemoteStatus, evaluate
from memsync.hub._pass import SyncReport
from memsync.local.fresh import header_line
from tests.helpers.sync import entry_line, make_replica

TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "F6G7H8"  # a GitHub token's shape, not a real one


def _lines() -> list[bytes]:
    return [
        entry_line("clean-1", 1_000_000, "Prefers short answers."),
        entry_line("in-text", 2_000_000, "Use password=hunter22x for the staging box."),
        entry_line("in-extra", 3_000_000, "A plain fact.", note=f"token {TOKEN}"),
        entry_line("nested", 4_000_000, "Another fact.", meta={"auth": {"k": [TOKEN]}}),
        entry_line("in-tags", 5_000_000, "Tagged.", tags=["AKIAIOSFODNN7EXAMPLE"]),
        entry_line("clean-2", 6_000_000, "Rotate API keys every month."),
    ]


WITHHELD = ["in-text", "in-extra", "nested", "in-tags"]


def test_every_string_field_is_scanned_and_ordinary_sentences_pass() -> None:
    found = {json.loads(raw)["id"]: record_secrets(raw) for raw in _lines()}
    assert [rid for rid, kinds in found.items() if kinds] == WITHHELD
    assert found["in-extra"] == ["GitHub token"]
    assert found["in-tags"] == ["AWS access key id"]


@pytest.mark.slow
def test_sync_withholds_a_peers_credentials_and_merges_the_rest(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    (hub / "notes").mkdir(parents=True)
    (hub / "notes" / "peer.jsonl").write_bytes(
        header_line(1) + b"".join(raw + b"\n" for raw in _lines())
    )
    me = make_replica(tmp_path, "me", str(hub))
    result = me.cli("sync", "--json")
    assert result.rc == 0, result.err
    (report,) = json.loads(result.out)
    assert [(w["id"], w["line"]) for w in report["withheld"]] == [
        ("in-text", 3),
        ("in-extra", 4),
        ("nested", 5),
        ("in-tags", 6),
    ]
    assert all(w["file"] == "hub:notes/peer.jsonl" for w in report["withheld"])
    assert TOKEN not in result.out  # what it looks like, never the value
    assert sorted(r.id for r in me.view().records) == ["clean-1", "clean-2"]
    assert TOKEN.encode() not in me.path.read_bytes()

    human = me.cli("sync")  # said in the plain output too, once: the pass moved past them
    assert "withheld" not in human.out
    with (hub / "notes" / "peer.jsonl").open("ab") as peer:
        peer.write(entry_line("late", 7_000_000, f"export GITHUB_TOKEN={TOKEN}") + b"\n")
    human = me.cli("sync")
    assert human.rc == 0
    assert "withheld: hub:notes/peer.jsonl:8: id late looks like it holds a credential" in human.out


def test_sync_does_not_push_a_local_credential(tmp_path: Path) -> None:
    """An agent appended a secret by hand (no `add` to refuse it): it stays on this
    machine, reported, and every other record is pushed."""
    hub = tmp_path / "hub"
    hub.mkdir()
    me = make_replica(tmp_path, "me", str(hub))
    me.path.write_bytes(header_line(1) + b"".join(raw + b"\n" for raw in _lines()))
    (report,) = me.sync()
    assert [w["id"] for w in report["withheld"]] == WITHHELD
    assert all(w["file"] == str(me.path) for w in report["withheld"])
    assert report["pushed_records"] == 2
    pushed = (hub / "notes" / "me.jsonl").read_bytes()
    assert b"hunter22x" not in pushed
    assert TOKEN.encode() not in pushed


@pytest.mark.slow
def test_merge_withholds_credentials(tmp_path: Path) -> None:
    src = tmp_path / "src.jsonl"
    src.write_bytes(b"".join(raw + b"\n" for raw in _lines()))
    dest = tmp_path / "dest.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "memsync", "merge", str(src), "--into", str(dest), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = json.loads(out)
    assert [w["id"] for w in doc["withheld"]] == WITHHELD
    assert doc["appended"] == 2
    assert b"hunter22x" not in dest.read_bytes()


def test_status_counts_a_withheld_record_as_a_problem() -> None:
    now = 1_800_000_000 * SECOND
    remote = RemoteStatus()
    report = SyncReport("notes", "hub")
    report.withheld = [
        {"file": "hub:notes/peer.jsonl", "line": 3, "id": "in-text", "looks_like": ["password"]}
    ]
    remote.note_pass(report, now)
    remote.note_pass(SyncReport("notes", "hub"), now + SECOND)  # a later, clean pass
    status = DaemonStatus(
        pid=1,
        replica="me",
        config="/x/config.toml",
        started_at=now,
        updated_at=now,
        memories={"notes": MemoryStatus(path="/x", remotes={"hub": remote})},
    )
    verdict = evaluate(status, 1, now + 60 * SECOND)
    (problem,) = verdict.problems
    assert "1 record(s) withheld" in problem
    assert "hub:notes/peer.jsonl:3, id in-text (password)" in problem
    status.updated_at = now + 8 * 86_400 * SECOND  # a week on, not forever
    assert evaluate(status, 1, status.updated_at).ok


AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_a_credential_in_a_field_name_is_withheld(tmp_path: Path) -> None:
    """Issue 24, item 4: field names are strings a record holds; a known credential name
    in an unknown field carries its value."""
    lines = [
        entry_line("clean", 1_000_000, "A plain fact.", note="deploys on Fridays"),
        entry_line("in-name", 2_000_000, "A plain fact.", **{AWS_ID: AWS_SECRET}),
        entry_line("nested-name", 3_000_000, "A fact.", meta={"auth": {AWS_ID: "x"}}),
        entry_line("named-value", 4_000_000, "A fact.", db_password="S3cr3t!x9"),
        entry_line("clean-name", 5_000_000, "A fact.", ticket="OPS-1234", sort_key="name"),
    ]
    found = {json.loads(raw)["id"]: record_secrets(raw) for raw in lines}
    assert found == {
        "clean": [],
        "in-name": ["AWS access key id"],
        "nested-name": ["AWS access key id"],
        "named-value": ["password assignment"],
        "clean-name": [],
    }
    hub = tmp_path / "hub"
    (hub / "notes").mkdir(parents=True)
    (hub / "notes" / "peer.jsonl").write_bytes(header_line(1) + b"".join(r + b"\n" for r in lines))
    me = make_replica(tmp_path, "me", str(hub))
    result = me.cli("sync", "--json")
    assert result.rc == 0, result.err
    (report,) = json.loads(result.out)
    assert [w["id"] for w in report["withheld"]] == ["in-name", "nested-name", "named-value"]
    assert sorted(r.id for r in me.view().records) == ["clean", "clean-name"]
    assert AWS_ID.encode() not in me.path.read_bytes()
