"""Sync through an S3 hub (issue 11), against a real SeaweedFS on 127.0.0.1.

Replicas are real config files and state directories (`tests.helpers.sync`) whose remote
"hub" is `s3://<a fresh bucket>/hub`, with the credentials in the environment, as a user
would set them. Request counts come from botocore's own event hooks on the client the pass
uses, so they count real HTTP requests (retries included).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memsync.core.timestamps import SECOND
from memsync.hub.compaction import acknowledged_for, compact_own_hub_file
from memsync.hub.transports import Transport
from memsync.hub.transports.s3 import MERGE_SEGMENTS, S3Transport
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.hang_relay import FreezingRelay
from tests.helpers.s3server import S3Server, start_s3
from tests.helpers.sshd import SshdServer
from tests.helpers.sync import (
    MEMORY,
    Replica,
    assert_converged,
    assert_unique,
    entry_line,
    make_replica,
    random_ops,
    record_lines,
    ssh_remote,
    sync_rounds,
)

pytestmark = pytest.mark.integration

DAY = 86_400 * SECOND


@pytest.fixture(autouse=True)
def _s3_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials through the environment (the standard chain); no ~/.aws of the user's."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "memsync-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "memsync-test-secret-0123456789")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.new_bucket()


def s3_remote(server: S3Server, bucket: str) -> dict[str, Any]:
    """The keys of a `[[remote]]` table for the hub `s3://<bucket>/hub`."""
    return {"url": f"s3://{bucket}/hub", "endpoint_url": server.endpoint, "region": "us-east-1"}


def s3_replica(tmp: Path, name: str, server: S3Server, bucket: str) -> Replica:
    return make_replica(tmp, name, remotes={"hub": s3_remote(server, bucket)})


def hub_contents(server: S3Server, bucket: str, memory: str = MEMORY) -> dict[str, bytes]:
    """Every file of a memory in the S3 hub, read through a fresh transport."""
    t = S3Transport(bucket, "hub", client=server.client())
    return {f.name: t.read(memory, f.name, 0, f.size) for f in t.list_files(memory)}


def hub_records(server: S3Server, bucket: str) -> dict[str, list[bytes]]:
    out = {}
    for name, data in hub_contents(server, bucket).items():
        if name.endswith(".jsonl"):
            lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
            out[name] = [raw for raw in lines if raw.startswith(b'{"id"')]
    return out


def keys(server: S3Server, bucket: str) -> list[str]:
    reply = server.client().list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in reply.get("Contents", [])]


def _pool(transport: Transport) -> dict[str, Transport]:
    """Transports for `sync_config`, by remote name: the one remote, "hub"."""
    return {"hub": transport}


class Counted:
    """A boto3 client for `server` whose HTTP requests are counted by operation."""

    def __init__(self, server: S3Server) -> None:
        self.client = server.client()
        self.requests: Counter[str] = Counter()
        self.bytes_sent = 0
        self.client.meta.events.register("before-send.s3", self._count)

    def _count(self, request: Any, event_name: str, **_: Any) -> None:
        self.requests[event_name.rsplit(".", 1)[-1]] += 1
        body = request.body
        self.bytes_sent += len(body) if isinstance(body, bytes) else 0

    def take(self) -> dict[str, int]:
        out = dict(self.requests)
        self.requests.clear()
        return out


# --- convergence ----------------------------------------------------------------------


def test_three_replicas_converge_through_one_s3_hub_while_writing(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    reps = [s3_replica(tmp_path, n, s3_server, bucket) for n in "abc"]
    rng = random.Random(41)
    for n in range(4):
        for r in rng.sample(reps, rng.randint(1, 3)):
            random_ops(rng, r, rng.randint(0, 6), tag=f" ({r.name} {n})")
            r.sync()
    sync_rounds(reps, rng, 2)
    assert_converged(reps)
    assert len(reps[0].view()) > 0
    for name, records in hub_records(s3_server, bucket).items():
        assert_unique(records, name)
    before = hub_contents(s3_server, bucket), keys(s3_server, bucket)
    for reports in sync_rounds(reps, rng, 1):  # idempotence: nothing moves
        for report in reports:
            assert (report["pushed_bytes"], report["pulled_records"]) == (0, 0), report
    assert (hub_contents(s3_server, bucket), keys(s3_server, bucket)) == before


def test_a_mixed_chain_of_folder_ssh_and_s3_hubs_converges(
    tmp_path: Path, s3_server: S3Server, bucket: str, sshd_server: SshdServer
) -> None:
    """a <-folder-> b <-ssh-> c <-s3-> d: every record reaches every replica."""
    folder = tmp_path / "folder-hub"
    ssh_hub = tmp_path / "ssh-hub"
    folder.mkdir()
    ssh_hub.mkdir()
    ssh = ssh_remote(sshd_server, ssh_hub)
    ssh_table = {"url": ssh.pop("hub_url"), **{k: str(v) for k, v in ssh.items()}}
    s3 = s3_remote(s3_server, bucket)
    a = make_replica(tmp_path, "a", remotes={"folder": {"url": str(folder)}})
    b = make_replica(tmp_path, "b", remotes={"folder": {"url": str(folder)}, "ssh": ssh_table})
    c = make_replica(tmp_path, "c", remotes={"ssh": ssh_table, "s3": s3})
    d = make_replica(tmp_path, "d", remotes={"s3": s3})
    chain = [a, b, c, d]
    for r in chain:
        r.memory().add("fact", f"Written on {r.name}.")
    for _ in range(3):  # a record needs up to three passes along the chain and back
        for r in [*chain, *reversed(chain)]:
            r.sync()
    assert_converged(chain)
    texts = {json.loads(rec.raw)["text"] for rec in d.view().records}
    assert texts == {f"Written on {n}." for n in "abcd"}


# --- request counts -------------------------------------------------------------------


def test_request_counts_of_idle_and_one_record_passes(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Idle: one LIST per memory. One new record: the writer one LIST and one PUT; the
    peer one LIST and one GET of the new segment (plus, since it read something new, the
    watermark file it publishes: one PUT and the DELETE of its previous generation). Each
    pass that changed something also publishes its receipt (issue 21): one PUT and the
    DELETE of the previous one."""
    a, b = (s3_replica(tmp_path, n, s3_server, bucket) for n in "ab")
    ca, cb = Counted(s3_server), Counted(s3_server)
    ta = _pool(S3Transport(bucket, "hub", client=ca.client))
    tb = _pool(S3Transport(bucket, "hub", client=cb.client))
    for i in range(50):
        a.memory().add("fact", f"Record {i} before the counting starts.")
    b.memory().add("fact", "From b.")
    for r, t in ((a, ta), (b, tb), (a, ta), (b, tb)):
        assert all(rep.ok for rep in r.sync_config(transports=t))
    ca.take(), cb.take()

    for r, t, c in ((a, ta, ca), (b, tb, cb)):  # idle
        [report] = r.sync_config(transports=t)
        assert report.ok, report
        assert c.take() == {"ListObjectsV2": 1}, r.name

    a.memory().add("fact", "One new record.")
    [report] = a.sync_config(transports=ta)
    assert report.pushed_records == 1
    assert ca.take() == {"ListObjectsV2": 1, "PutObject": 2, "DeleteObjects": 1}
    [report] = b.sync_config(transports=tb)
    assert report.pulled_records == 1
    # ... and reads the writer's new receipt (one GET; an unchanged one costs nothing).
    assert cb.take() == {"ListObjectsV2": 1, "GetObject": 2, "PutObject": 2, "DeleteObjects": 2}
    assert report.pulled_bytes < 1024  # the new segment only (receipts are not records)
    assert_converged([a, b])
    # Each `memsync sync` run opens a new client: the same counts hold (no probe again).
    [report] = b.sync_config(transports=tb)
    assert cb.take() == {"ListObjectsV2": 1}


# --- faults ---------------------------------------------------------------------------


def test_a_lost_put_reply_neither_duplicates_nor_loses(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """The PUT lands, the reply is lost (the client raises); the next pass adopts the
    segment as ours: the hub holds each record once, and the peer gets them all."""
    from botocore.exceptions import ConnectionClosedError

    a, b = (s3_replica(tmp_path, n, s3_server, bucket) for n in "ab")
    a.memory().add("fact", "Before.")
    a.sync()
    client = s3_server.client()
    lost: list[str] = []

    def lose_reply(http_response: Any, parsed: Any, model: Any, **kwargs: Any) -> None:
        if not lost and http_response.status_code == 200:
            lost.append("once")
            raise ConnectionClosedError(endpoint_url=s3_server.endpoint)

    client.meta.events.register("after-call.s3.PutObject", lose_reply)
    transports = _pool(S3Transport(bucket, "hub", client=client))
    for i in range(3):
        a.memory().add("fact", f"Pushed when the reply was lost {i}.")
    [report] = a.sync_config(transports=transports)
    assert lost
    assert report.error is not None, report
    assert "s3://" in report.error
    assert "\n" not in report.error
    a.sync()
    a.sync()
    b.sync()
    records = hub_records(s3_server, bucket)["a.jsonl"]
    assert_unique(records, "a.jsonl")
    assert len(records) == 4
    assert_converged([a, b])


def test_a_retried_put_whose_reply_was_lost_gets_412_and_succeeds(
    s3_server: S3Server, bucket: str
) -> None:
    """botocore retries a PUT whose reply it never got: with If-None-Match the retry gets
    412, and the transport checks the object holds our bytes."""
    counted = Counted(s3_server)
    retried: list[bool] = []

    def retry_once(response: Any, attempts: int, **kwargs: Any) -> float | None:
        if not retried and response is not None and response[0].status_code == 200:
            retried.append(True)
            return 0.0  # pretend the reply was lost: send it again
        return None

    counted.client.meta.events.register("needs-retry.s3.PutObject", retry_once)
    t = S3Transport(bucket, "hub", client=counted.client)
    t.write_at("notes", "a.jsonl", 0, b"setup\n")  # probes the store first
    counted.take()
    retried.clear()
    assert t.write_at("notes", "a.jsonl", 6, b"line\n") == 11
    assert retried
    assert counted.take() == {"PutObject": 2, "GetObject": 1}
    assert t.mode == "conditional"
    fresh = S3Transport(bucket, "hub", client=s3_server.client())
    assert fresh.read("notes", "a.jsonl", 0, 100) == b"setup\nline\n"
    # A stale view of the file: another writer's bytes at that offset are refused.
    stale = S3Transport(bucket, "hub", client=s3_server.client())
    stale.list_files("notes")
    t.write_at("notes", "a.jsonl", 11, b"next\n")
    with pytest.raises(Exception, match="already holds other bytes"):
        stale.write_at("notes", "a.jsonl", 11, b"else\n")
    assert stale.write_at("notes", "a.jsonl", 11, b"next\n") == 16  # same bytes: ours


def test_the_server_down_for_a_while_fails_cleanly_then_recovers(
    tmp_path: Path, bucket: str, s3_server: S3Server
) -> None:
    own = start_s3(tmp_path / "own-s3")
    try:
        own_bucket = own.new_bucket()
        a, b = (s3_replica(tmp_path, n, own, own_bucket) for n in "ab")
        a.memory().add("fact", "Before the outage.")
        a.sync()
        own.stop()
        a.memory().add("fact", "During the outage.")
        result = a.cli("sync")
        assert result.rc == 1
        [line] = result.err.strip().splitlines()
        assert line.startswith("memsync: notes <-> hub: ")
        assert own.endpoint.split("//")[1] in line or "connect" in line.lower(), line
        own.start()
        # Back: its volumes may answer "InternalError" for a moment after the start; each
        # failed pass is one line, and a later one succeeds (the daemon backs off so).
        deadline = time.monotonic() + 30
        while (result := a.cli("sync")).rc != 0:
            assert len(result.err.strip().splitlines()) == 1, result.err
            assert time.monotonic() < deadline, result.err
            time.sleep(0.5)
        a.sync()
        b.sync()
        assert_converged([a, b])
        assert len(b.view()) == 2
    finally:
        own.stop()


def test_a_frozen_endpoint_fails_the_pass_within_timeout_seconds(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Issue 24, item 11: a frozen S3 endpoint (connected, then silent: no reset) took 81 s
    to fail a pass, three tries of 20 s and back-offs; `timeout_seconds` was SSH's only."""
    relay = FreezingRelay(s3_server.ports["s3.port"])
    try:
        remote = s3_remote(s3_server, bucket) | {
            "endpoint_url": f"http://127.0.0.1:{relay.port}",
            "timeout_seconds": 2,
        }
        a = make_replica(tmp_path, "a", remotes={"hub": remote})
        a.memory().add("fact", "Before the freeze.")
        a.sync()  # the relay works
        relay.freeze()
        a.memory().add("fact", "During the freeze.")
        started = time.monotonic()
        result = a.cli("sync")
        elapsed = time.monotonic() - started
        assert result.rc == 1
        [line] = result.err.strip().splitlines()
        assert line.startswith("memsync: notes <-> hub: s3://")
        assert "no answer within 2 s (the server or the network hangs)" in line
        assert elapsed < 3.5, f"{elapsed:.1f} s: the pass waited past timeout_seconds"
    finally:
        relay.close()


def test_wrong_credentials_are_one_line_naming_the_remote_and_exit_1(
    tmp_path: Path, s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = s3_replica(tmp_path, "a", s3_server, bucket)
    a.memory().add("fact", "Never pushed.")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    result = a.cli("sync")
    assert result.rc == 1
    [line] = result.err.strip().splitlines()
    assert line.startswith("memsync: notes <-> hub: s3://")
    assert "access denied" in line
    assert "credentials" in line
    assert "not-the-secret" not in result.err + result.out
    assert keys(s3_server, bucket) == []


def test_a_segment_truncated_or_corrupted_by_hand_is_reported_never_spread(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    a, b, c = (s3_replica(tmp_path, n, s3_server, bucket) for n in "abc")
    for i in range(3):
        a.memory().add("fact", f"Segment {i}.")
        a.sync()
    b.sync()
    client = s3_server.client()
    segments = sorted(k for k in keys(s3_server, bucket) if "/a.jsonl/" in k)
    assert len(segments) == 3
    # 1. The middle segment truncated: the segments no longer tile the file.
    middle = client.get_object(Bucket=bucket, Key=segments[1])
    data = middle["Body"].read()
    client.put_object(Bucket=bucket, Key=segments[1], Body=data[:10], Metadata=middle["Metadata"])
    result = c.cli("sync")
    assert result.rc == 0, result.err  # skipped and reported, not a failed pass (issue 24)
    [line] = [x for x in result.out.splitlines() if x.startswith("  skipped: ")]
    assert "not read" in line
    assert segments[1].rsplit("/", 1)[-1] in line
    assert len(c.view()) == 0
    client.put_object(Bucket=bucket, Key=segments[1], Body=data, Metadata=middle["Metadata"])
    # 2. A new segment whose bytes were changed (same length, its checksum kept).
    a.memory().add("fact", "Segment 3, to be corrupted.")
    a.sync()
    newest = max(k for k in keys(s3_server, bucket) if "/a.jsonl/" in k)
    obj = client.get_object(Bucket=bucket, Key=newest)
    good = obj["Body"].read()
    bad = good.replace(b"corrupted", b"CORRUPTED")
    client.put_object(Bucket=bucket, Key=newest, Body=bad, Metadata=obj["Metadata"])
    result = b.cli("sync")
    assert result.rc == 0, result.err
    assert "do not match their checksum" in result.out
    assert b"CORRUPTED" not in b.path.read_bytes()
    # 3. Garbage appended by hand as a plain object (no checksum): bad lines, reported, not
    # merged, and not pushed on by c to anyone.
    client.put_object(Bucket=bucket, Key=newest, Body=good, Metadata=obj["Metadata"])
    end = int(newest.rsplit("/", 1)[-1]) + len(good)
    garbage_key = newest.rsplit("/", 1)[0] + f"/{end:020d}"
    client.put_object(Bucket=bucket, Key=garbage_key, Body=b'{"id": "x", "broken\nnot json\n')
    [report] = c.sync()
    assert report["bad"], report
    assert b"broken" not in c.path.read_bytes()
    assert all(
        b"broken" not in d for n, d in hub_contents(s3_server, bucket).items() if n != "a.jsonl"
    )
    assert {r.raw for r in c.view().records} == {r.raw for r in a.view().records}


def test_a_peer_file_whose_segments_do_not_tile_is_skipped_and_the_rest_syncs(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Issue 24, item 8: one planted file with a gap (`.../0000000000000001/
    00000000000000099999` beside a valid first segment) failed every pass on every machine:
    nothing pulled from the other peers, nothing pushed. Now it is skipped and reported, as
    is one whose segments overlap, and everything else syncs."""
    a, b, c = (s3_replica(tmp_path, n, s3_server, bucket) for n in "abc")
    on_a = a.memory().add("fact", "From a.").id
    on_b = b.memory().add("fact", "From b.").id
    a.sync()
    b.sync()
    line = entry_line("cccccccccccc", "2026-11-01T00:00:00Z", "Planted.") + b"\n"
    client = s3_server.client()
    folder = f"hub/{MEMORY}"
    for key in (
        f"{folder}/pk4.jsonl/0000000000000001/{0:020d}",  # a gap: 0..len, then 99999
        f"{folder}/pk4.jsonl/0000000000000001/{99999:020d}",
        f"{folder}/pk5.jsonl/0000000000000001/{0:020d}",  # an overlap: 0..len, then len-5
        f"{folder}/pk5.jsonl/0000000000000001/{len(line) - 5:020d}",
    ):
        client.put_object(Bucket=bucket, Key=key, Body=line)
    on_c = c.memory().add("fact", "From c.").id

    result = c.cli("sync")
    assert result.rc == 0, result.err
    skipped = [x for x in result.out.splitlines() if x.startswith("  skipped: ")]
    assert len(skipped) == 2, result.out
    [gap] = [x for x in skipped if "/pk4.jsonl" in x]
    assert "next segment starts at 99999" in gap
    [overlap] = [x for x in skipped if "/pk5.jsonl" in x]
    assert f"ends at {len(line)}, but the next segment starts at {len(line) - 5}" in overlap
    assert {r.id for r in c.view().records} == {on_a, on_b, on_c}  # pulled from a and b
    [report] = a.sync()
    assert len(report["skipped"]) == 2
    assert {r.id for r in a.view().records} == {on_a, on_b, on_c}  # c pushed
    assert b"Planted" not in c.path.read_bytes() + a.path.read_bytes()


# --- compaction -----------------------------------------------------------------------


def _compact_hub_file(r: Replica, transport: S3Transport) -> tuple[int, int] | None:
    ack = acknowledged_for(StateDir(r.state_dir), MEMORY, ["hub"], r.replica_id)
    return compact_own_hub_file(
        memory=MEMORY,
        remote="hub",
        transport=transport,
        replica=r.replica_id,
        state_dir=StateDir(r.state_dir),
        horizon=DAY,
        acknowledged=ack,
        now=now_us() + 2 * DAY,
    )


def test_many_small_segments_are_merged_and_peers_keep_their_offsets(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    a, b = (s3_replica(tmp_path, n, s3_server, bucket) for n in "ab")
    pool = _pool(S3Transport(bucket, "hub", client=s3_server.client()))
    for i in range(MERGE_SEGMENTS + 4):
        a.memory().add("fact", f"One small push {i}.")
        assert all(rep.ok for rep in a.sync_config(transports=pool))
    b.sync()
    assert sum("/a.jsonl/" in k for k in keys(s3_server, bucket)) == MERGE_SEGMENTS + 4
    before = hub_contents(s3_server, bucket)["a.jsonl"]
    transport = S3Transport(bucket, "hub", client=s3_server.client())
    assert _compact_hub_file(a, transport) == (len(before), len(before))
    assert [k for k in keys(s3_server, bucket) if "/a.jsonl/" in k][1:] == []  # one segment
    assert hub_contents(s3_server, bucket)["a.jsonl"] == before
    a.memory().add("fact", "After the merge.")
    a.sync()
    [report] = b.sync()
    assert report["pulled_records"] == 1
    assert report["pulled_bytes"] < 4096, "b kept its offset: no re-read of the whole file"
    assert_converged([a, b])


def test_tombstones_are_held_back_and_compaction_is_noticed_on_s3(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """The resurrection case: c has not read the tombstone, so it stays; a's compacted hub
    file (a new generation) is read again by peers, and the entry stays deleted."""
    from memsync.local.compaction import compact_file

    a, b, c = (s3_replica(tmp_path, n, s3_server, bucket) for n in "abc")
    rid = a.memory().add("fact", "The staging bucket moved.").id
    mem = a.memory()
    for i in range(10):  # versions that compaction can drop
        mem.supersede(mem.add("lesson", f"Version {i}.").id, f"Version {i}, revised.")
    for r in (a, b, c):
        r.sync()
    a.memory().forget(rid)
    a.sync()
    b.sync()  # b reads the tombstone; c does not
    a.sync()
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    later = now_us() + 2 * DAY
    compact_file(a.path, now=later, horizon_days=1, quiet_seconds=0, acknowledged=ack)
    assert rid in a.path.read_text()  # the tombstone is kept for c
    transport = S3Transport(bucket, "hub", client=s3_server.client())
    sizes = _compact_hub_file(a, transport)
    assert sizes is not None
    assert sizes[1] < sizes[0]
    for r in (c, a, b, c):
        r.sync()
    assert_converged([a, b, c])
    assert all(rec.id != rid for r in (a, b, c) for rec in r.view().records)
    assert len(record_lines(a.path)) > 0
    # Only the new generation is left of a's hub file.
    gens = {k.split("/")[3] for k in keys(s3_server, bucket) if "/a.jsonl/" in k}
    assert len(gens) == 1


def test_a_store_that_ignores_conditional_puts_is_written_with_plain_puts(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """A store that drops `If-None-Match` (simulated: botocore removes the header before
    signing, so the server never sees it) is detected by the probe, remembered in the
    folder's marker, and written with plain PUTs; sync works the same."""

    def drop_condition(request: Any, **_: Any) -> None:
        if "If-None-Match" in request.headers:
            del request.headers["If-None-Match"]

    ignoring = s3_server.client()
    ignoring.meta.events.register("before-sign.s3.PutObject", drop_condition)
    t = S3Transport(bucket, "hub", client=ignoring)
    assert t.write_at(MEMORY, "x.jsonl", 0, b"one\n") == 4
    assert t.mode == "plain"
    assert f"hub/{MEMORY}/.mode/plain" in keys(s3_server, bucket)
    fresh = S3Transport(bucket, "hub", client=s3_server.client())
    fresh.list_files(MEMORY)
    assert fresh.mode == "plain"  # from the marker, without a probe
    assert fresh.write_at(MEMORY, "x.jsonl", 4, b"two\n") == 8
    a, b = (s3_replica(tmp_path, n, s3_server, bucket) for n in "ab")
    a.memory().add("fact", "Through plain PUTs.")
    a.sync()
    b.sync()
    assert_converged([a, b])


def test_no_credentials_at_all_is_one_line_saying_where_they_come_from(
    tmp_path: Path, s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = s3_replica(tmp_path, "a", s3_server, bucket)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = a.cli("sync")
    assert result.rc == 1
    [line] = result.err.strip().splitlines()
    assert line.startswith("memsync: notes <-> hub: s3://")
    assert "no S3 credentials found" in line


def test_three_replicas_writing_and_syncing_at_the_same_time_converge(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Three "machines" append and sync concurrently (threads, each with its own client,
    state and local file): watermark files are replaced while others read them. Every pass
    that fails must say why in one line; afterwards two rounds converge, nothing twice."""
    import threading

    reps = [s3_replica(tmp_path, n, s3_server, bucket) for n in "abc"]
    errors: list[str] = []

    def machine(r: Replica) -> None:
        pool = _pool(S3Transport(bucket, "hub", client=s3_server.client()))
        for i in range(6):
            r.memory().add("fact", f"{r.name} wrote {i} while the others synced.")
            for report in r.sync_config(transports=pool):
                if report.error is not None:
                    errors.append(report.error)

    threads = [threading.Thread(target=machine, args=(r,)) for r in reps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all("\n" not in e for e in errors), errors
    sync_rounds(reps, None, 2)
    assert_converged(reps)
    assert len(reps[0].view()) == 18
    for name, records in hub_records(s3_server, bucket).items():
        assert_unique(records, name)


# --- hub encryption over S3 (issue 12: "and on the object-store remote") ----------------


def test_an_encrypted_s3_hub_converges_and_holds_nothing_readable(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    from memsync.hub.keys import new_master_key
    from tests.helpers.crypto import encrypted_replica

    key = new_master_key()
    remote = s3_remote(s3_server, bucket)
    reps = [
        encrypted_replica(
            tmp_path,
            n,
            remote["url"],
            key,
            endpoint_url=remote["endpoint_url"],
            region=remote["region"],
        )
        for n in "abc"
    ]
    rng = random.Random(43)
    for n in range(3):
        for r in reps:
            random_ops(rng, r, rng.randint(1, 5), tag=f" ({r.name} {n})")
            r.sync()
    sync_rounds(reps, rng, 2)
    assert_converged(reps)
    records = reps[0].view().records
    assert records
    everything = b"".join(hub_contents(s3_server, bucket).values())
    assert b'"encryption"' in everything  # the readable headers name the scheme
    for rec in records:
        assert rec.id.encode() not in everything
        assert str(rec.fields()["text"]).encode() not in everything
