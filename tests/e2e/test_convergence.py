"""Convergence receipts end to end (issue 21): three replicas through a folder, an SSH and an
S3 hub, plain and encrypted, driven by `memsync sync`; `memsync status` says who agrees,
who is behind, ahead or diverged, and `memsync diff` names exactly the differing ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsync.local.fresh import now_us
from tests.helpers.receipts import forge_digest, replica_on, standings, status_json
from tests.helpers.s3server import ACCESS_KEY, SECRET_KEY, S3Server
from tests.helpers.sync import Replica, entry_line

HUBS = pytest.mark.parametrize(
    ("kind", "encrypted"),
    [(k, e) for k in ("folder", "ssh", "s3") for e in (False, True)],
    ids=[f"{k}-{'encrypted' if e else 'plain'}" for k in ("folder", "ssh", "s3") for e in (0, 1)],
)


@pytest.fixture
def replicas(
    request: pytest.FixtureRequest, tmp_path: Path, hub: Path, kind: str, encrypted: bool
) -> list[Replica]:
    opts: dict[str, Any] = {"hub": hub, "encrypted": encrypted}
    if kind == "ssh":
        opts["sshd"] = request.getfixturevalue("sshd_server")
    if kind == "s3":
        mp: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
        # Credentials through the environment, as a user sets them; no ~/.aws of the user's.
        mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        mp.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.delenv("AWS_PROFILE", raising=False)
        server: S3Server = request.getfixturevalue("s3_server")
        opts["s3"] = (server, server.new_bucket())
    return [replica_on(kind, tmp_path, name, **opts) for name in "abc"]


def _diff(replica: Replica, other: Replica) -> tuple[int, dict[str, Any]]:
    result = replica.cli("diff", other.replica_id, "--json")
    assert result.err == "", result.err
    doc: dict[str, Any] = json.loads(result.out)
    return result.rc, doc


def _all_agree(replicas: list[Replica]) -> None:
    for r in replicas:
        assert standings(r) == {r.replica_id: "this machine"} | {
            o.replica_id: "agrees" for o in replicas if o is not r
        }, r.name
        (row,) = status_json(r)["convergence"]
        assert row["in_sync"]


@HUBS
def test_three_replicas_agree_fall_behind_get_ahead_diverge_and_diff_names_the_ids(
    replicas: list[Replica], kind: str, encrypted: bool
) -> None:
    a, b, c = replicas
    for r in replicas:
        r.memory().add("fact", f"Written on {r.name}.")
    for r in (a, b, c, a, b, a):
        r.sync()
    _all_agree(replicas)
    assert _diff(a, c) == (0, _diff(a, c)[1])
    assert _diff(a, c)[1]["differences"] == []

    # c is offline while a and b write.
    x = a.memory().add("fact", "c has not seen this.")
    a.sync()
    y = b.memory().add("preference", "Nor this.")
    b.sync()
    a.sync()
    for r in (a, b):
        assert standings(r)["c"] == "behind"
        assert set(standings(r).values()) == {"this machine", "agrees", "behind"}
    rc, doc = _diff(a, c)
    assert rc == 1
    assert [d["id"] for d in doc["differences"]] == sorted([x.id, y.id])
    assert all(d["there"] is None for d in doc["differences"])
    assert doc["unresolved"] == []
    rc, doc = _diff(c, a)  # from c's side: entries only there, read from the hub's tails
    assert [(d["id"], d["here"]) for d in doc["differences"]] == [
        (i, None) for i in sorted([x.id, y.id])
    ]
    c.sync()  # back
    b.sync()
    a.sync()
    _all_agree(replicas)

    # A record only in b's local file, not pushed yet: b is ahead; diff names it alone.
    with b.path.open("ab") as f:
        f.write(entry_line("0000injected", now_us(), "Appended by hand on b.") + b"\n")
    (row,) = status_json(b)["convergence"]
    (me,) = [s for s in row["replicas"] if s["replica"] == "b"]
    assert me["state"] == "this machine"
    assert me["detail"].startswith("ahead: ")
    rc, doc = _diff(b, a)
    assert rc == 1
    assert [(d["id"], d["there"]) for d in doc["differences"]] == [("0000injected", None)]
    b.sync()
    a.sync()
    c.sync()
    a.sync()

    # A fault: c publishes another view of the same records. Loud on a and b.
    forge_digest(c)
    for r in (a, b):
        assert standings(r)["c"] == "DIVERGED"
        result = r.cli("status")
        assert result.rc == 1
        assert "replica 'c' DIVERGED" in result.out
    rc, doc = _diff(a, c)
    assert rc == 1
    assert doc["differences"] == []  # the records agree: the receipt does not
    assert doc["unresolved"] == doc["buckets"] == [0]
