"""A deterministic fault campaign (issue 13): 3 to 5 replicas over the in-memory hub.

Each seed builds replicas (a local memory file and a state directory each, in tmp_path)
and runs a random schedule, drawn from `random.Random(seed)` alone: writes through the
`Memory` API (add, forget, supersede) and raw agent appends (new ids in other spellings,
CRLF lines, bad lines, a torn line), sync passes, compactions of the local file and of the
replica's own hub file, and faults injected by a wrapper around the transport:

- a crash of a pass at its k-th hub call (`Crash`, which nothing in memsync catches: the
  pass stops there, as under kill -9; what it saved before stays saved);
- a lost reply: the k-th write or replace lands, then the call fails;
- a torn write: the k-th write lands a prefix, then the call fails;
- a duplicated delivery: the k-th write lands twice;
- a stale listing: the listing of a pass is the one an earlier pass saw (sizes and times
  from the past, as an attribute cache gives them), so reads disagree with it;
- a lost state directory (a cache: it must cost a re-read, nothing more);
- clock skew: every replica has its own clock offset, passed as `now` everywhere, and
  clocks now and then step back.

After the schedule, a heal (fault-free rounds of passes by everyone, in a seeded order)
must bring every replica to the same view, and that view must be the view of every line
that was acknowledged anywhere (the oracle): nothing acknowledged lost, nothing forgotten
back, no bad line spread to another replica or to the hub. One more round then changes
nothing (idempotence). The seed is in every failure message.
"""

from __future__ import annotations

import collections
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memsync.core.lines import classify
from memsync.core.records import Record, canonical
from memsync.core.timestamps import SECOND, format_ts
from memsync.errors import NotQuiet, TransportError
from memsync.hub.compaction import acknowledged_for, compact_own_hub_file
from memsync.hub.state import save_replace_intent
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import RemoteFile
from memsync.hub.transports.memory import InMemoryTransport
from memsync.local.compaction import compact_file
from memsync.local.fresh import header_line
from memsync.local.memory import Memory
from memsync.local.reading import MemoryView, view_of
from memsync.local.statedir import StateDir

MEMORY = "notes"
REMOTE = "hub"
T0 = 1_790_000_000 * SECOND  # 2026-09-21: the simulated clock starts here
HORIZON_DAYS = 0.02  # about half an hour of simulated time: tombstones may really go
SEEDS = range(24)
STEPS = 60


class Crash(Exception):
    """A pass killed at a hub call: memsync catches no such exception, so the pass stops
    there and keeps only what it had saved (state files and SQLite commit as they go)."""


# --- the faulty hub -----------------------------------------------------------------------


@dataclass
class Fault:
    """One fault armed for the next pass of one replica."""

    kind: str  # "crash", "lost-reply", "torn", "duplicate", "stale-listing"
    at: int  # the call (crash) or the mutating call (the others) it hits, 1-based


class FaultyHub:
    """A `Transport` over one shared `InMemoryTransport`, as one replica sees it.

    File times come from a counter, so that the run depends on the seed alone. `arm`
    sets the fault of the next pass; `listings` keeps what earlier listings said.
    """

    def __init__(self, hub: InMemoryTransport, clock: list[int]) -> None:
        self.hub = hub
        self.clock = clock
        self.fault: Fault | None = None
        self.calls = 0
        self.mutations = 0
        self.fired = 0
        self.last = (8, 2)  # the calls and writes of the last pass: where faults can land
        self.listings: list[list[RemoteFile]] = []

    def arm(self, fault: Fault | None) -> None:
        if fault is None and self.calls:
            self.last = (max(self.calls, 2), max(self.mutations, 2))
        self.fault, self.calls, self.mutations = fault, 0, 0

    def draw(self, rng: random.Random, kinds: tuple[str, ...]) -> Fault:
        """A fault somewhere within a pass like the last one."""
        kind = rng.choice(kinds)
        calls, writes = self.last
        return Fault(kind, rng.randint(1, calls if kind in ("crash", "stale-listing") else writes))

    def _call(self) -> None:
        self.calls += 1
        f = self.fault
        if f is not None and f.kind == "crash" and self.calls == f.at:
            self.fault = None
            self.fired += 1
            raise Crash(f"killed at hub call {f.at}")

    def _mutation(self) -> str | None:
        """The fault that hits this write or replace, if any."""
        self.mutations += 1
        f = self.fault
        if f is not None and f.kind not in ("crash", "stale-listing") and self.mutations == f.at:
            self.fault = None
            self.fired += 1
            return f.kind
        return None

    def _touch(self, folder: str, name: str) -> None:
        self.clock[0] += 1
        self.hub.mtimes[(folder, name)] = float(self.clock[0])

    def list_files(self, folder: str) -> list[RemoteFile]:
        self._call()
        files = self.hub.list_files(folder)
        f = self.fault
        if f is not None and f.kind == "stale-listing" and self.listings:
            self.fault = None
            self.fired += 1
            old = self.listings[(f.at - 1) % len(self.listings)]
            self.listings.append(files)
            return old
        self.listings = [*self.listings[-3:], files]
        return files

    def size(self, folder: str, name: str) -> int | None:
        self._call()
        return self.hub.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        self._call()
        return self.hub.read(folder, name, offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        self._call()
        kind = self._mutation()
        if kind == "torn":
            self.hub.tear_next_write = len(data) // 2
            try:
                self.hub.write_at(folder, name, offset, data)
            finally:
                self._touch(folder, name)
        size = self.hub.write_at(folder, name, offset, data)
        if kind == "duplicate":
            size = self.hub.write_at(folder, name, offset, data)
        self._touch(folder, name)
        if kind == "lost-reply":
            raise TransportError(f"hub:{folder}/{name}: connection lost before the answer")
        return size

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self._call()
        kind = self._mutation()
        if kind == "torn":  # an atomic replace is all or nothing: nothing landed
            raise TransportError(f"hub:{folder}/{name}: connection dropped")
        self.hub.replace(folder, name, data)
        if kind == "duplicate":
            self.hub.replace(folder, name, data)
        self._touch(folder, name)
        if kind == "lost-reply":
            raise TransportError(f"hub:{folder}/{name}: connection lost before the answer")

    def close(self) -> None:
        """Nothing to release."""


# --- replicas and the oracle ----------------------------------------------------------------


@dataclass
class Sim:
    """One run: its replicas, the hub, the simulated time and what was acknowledged."""

    seed: int
    root: Path
    rng: random.Random
    names: list[str]
    skew: dict[str, int]
    hub: InMemoryTransport = field(default_factory=InMemoryTransport)
    time: int = T0
    mtime: list[int] = field(default_factory=lambda: [0])
    views: dict[str, FaultyHub] = field(default_factory=dict)
    acked: list[bytes] = field(default_factory=list)  # every acknowledged record line
    bad: list[tuple[str, bytes]] = field(default_factory=list)  # (writer, bad line)
    adds: dict[str, str] = field(default_factory=dict)  # id -> writer
    gone: set[str] = field(default_factory=set)  # ids forgotten or superseded
    log: list[str] = field(default_factory=list)
    compactions: int = 0
    faults: int = 0
    steps: int = 0

    def path(self, name: str) -> Path:
        return self.root / name / "memory.jsonl"

    def state(self, name: str) -> Path:
        return self.root / name / "state"

    def now(self, name: str) -> int:
        return self.time + self.skew[name]

    def where(self) -> str:
        return f"seed {self.seed}, {self.steps} steps (replay: run({self.seed}, tmp, steps={self.steps}))"

    def transport(self, name: str) -> FaultyHub:
        if name not in self.views:
            self.views[name] = FaultyHub(self.hub, self.mtime)
        return self.views[name]

    def last_line(self, name: str) -> bytes:
        data = self.path(name).read_bytes()
        return data.rstrip(b"\n").rsplit(b"\n", 1)[-1].rstrip(b"\r")

    def ack(self, name: str) -> Record:
        """Record the line a `Memory` call just appended as acknowledged."""
        raw = self.last_line(name)
        rec = classify(raw)
        assert type(rec) is Record, f"{self.where()}: {name} appended {raw!r}"
        self.acked.append(raw)
        return rec

    def sync(self, name: str, fault: Fault | None = None) -> SyncReport | None:
        t = self.transport(name)
        t.arm(fault)
        try:
            return sync_once(
                memory=MEMORY,
                local=self.path(name),
                remote=REMOTE,
                transport=t,
                replica=name,
                state_dir=self.state(name),
                now=self.now(name),
            )
        except Crash:
            return None
        finally:
            t.arm(None)


def _sentence(rng: random.Random) -> str:
    words = ("build", "needs", "python", "retry", "after", "rate", "limit", "staging", "tests")
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + "."


def _bad_line(rng: random.Random, nonce: str, ts: str) -> bytes:
    """A line rule 4 makes bad; `nonce` makes its bytes unique, to find it anywhere."""
    shapes = [
        b'{"id": "%s", "kind": "fact", "text": "unterminated' % nonce.encode(),
        b'{"id": "%s", "kind": "fact", "text": "t", "x": 1e999, "created_at": "%s"}',
        b'{"id": "%s", "deleted": true, "deleted": false, "created_at": "%s"}',
        b'{"id": "%s", "kind": "fact", "text": "t", "n": ' + b"[" * 40 + b"]" * 40
        + b', "created_at": "%s"}',
        b'{"id": "%s", "kind": "opinion", "text": "t", "created_at": "%s"}',
        b'{"id": "%s", "kind": "fact", "text": "t", "created_at": "yesterday"}',
        b'{"id": "%s", "kind": "fact", "text": "\xff\xfe", "created_at": "%s"}',
        b'{"id": "%s\\u0007", "kind": "fact", "text": "bell", "created_at": "%s"}',
    ]  # fmt: skip
    shape = rng.choice(shapes)
    n = shape.count(b"%s")
    args = (nonce.encode(), ts.encode())[:n]
    line = shape % args if n else shape
    assert type(classify(line)) is not Record
    return line


# --- the schedule ---------------------------------------------------------------------------


def _write(sim: Sim, name: str) -> None:
    rng = sim.rng
    mem = Memory(sim.path(name))
    now = sim.now(name)
    # The live records in the order the run made them (ids are random: an order by id
    # would make the schedule depend on them, not on the seed alone).
    view = {r.id: r for r in view_of([sim.path(name)], now).records}
    live = [view[rid] for rid in sim.adds if rid in view]
    roll = rng.random()
    if live and roll < 0.15:
        rid = rng.choice(live).id
        mem.forget(rid, now=now)
        sim.ack(name)
        sim.gone.add(rid)
        sim.log.append(f"{name} forgets {rid}")
    elif live and roll < 0.25:
        old = rng.choice(live)
        if old.user:
            return  # an inferred record cannot supersede the person's (rule 10)
        entry = mem.supersede(old.id, _sentence(rng), now=now)
        sim.ack(name)
        sim.gone.add(old.id)
        sim.adds[entry.id] = name
        sim.log.append(f"{name} supersedes {old.id} with {entry.id}")
    elif roll < 0.45:
        # An agent without memsync: one write of whole lines, O_APPEND.
        rid = f"r{rng.getrandbits(40):010x}"
        stamp = format_ts(now - rng.randint(0, 3000) * 1000)
        if rng.random() < 0.3:
            stamp = stamp.replace("Z", "+00:00")
        obj: dict[str, object] = {
            "id": rid,
            "kind": "lesson",
            "text": _sentence(rng),
            "created_at": stamp,
        }
        if rng.random() < 0.3:
            obj["x-agent"] = {"nested": [1, 2.5, None], "name": "café"}
        line = json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode()
        end = b"\r\n" if rng.random() < 0.2 else b"\n"
        with open(sim.path(name), "ab") as f:
            f.write(line + end)
        sim.acked.append(line)
        sim.adds[rid] = name
        sim.log.append(f"{name} appends {rid} raw")
    elif roll < 0.52:
        nonce = f"bad{rng.getrandbits(40):010x}"
        line = _bad_line(rng, nonce, format_ts(now))
        with open(sim.path(name), "ab") as f:
            f.write(line + b"\n")
        sim.bad.append((name, line))
        sim.log.append(f"{name} appends a bad line")
    elif roll < 0.55:
        # An agent killed mid-write: a prefix of a record, no newline. The next append
        # (memsync's own) terminates it: a bad line of this file, never anyone else's.
        nonce = f"torn{rng.getrandbits(40):010x}"
        line = b'{"id": "%s", "kind": "fact", "text": "cut here' % nonce.encode()
        with open(sim.path(name), "ab") as f:
            f.write(line)
        mem.add("fact", _sentence(rng), now=now)  # terminates the torn line first
        rec = sim.ack(name)
        sim.adds[rec.id] = name
        sim.bad.append((name, line))
        sim.log.append(f"{name} leaves a torn line, then adds {rec.id}")
    else:
        user = rng.random() < 0.2
        entry = mem.add(
            rng.choice(("fact", "lesson", "preference")),
            _sentence(rng),
            scope=rng.choice(("global", "project:memsync")),
            source="user" if user else rng.choice((None, "session:x")),
            now=now,
        )
        sim.ack(name)
        sim.adds[entry.id] = name
        sim.log.append(f"{name} adds {entry.id}")


def _compact(sim: Sim, name: str, faulty: bool) -> None:
    now = sim.now(name)
    ack = acknowledged_for(StateDir(sim.state(name)), MEMORY, [REMOTE], name)
    if sim.rng.random() < 0.6:
        try:
            result = compact_file(
                sim.path(name),
                now=now,
                horizon_days=HORIZON_DAYS,
                quiet_seconds=0,
                acknowledged=ack,
                grace_seconds=0,
            )
        except NotQuiet:
            return
        sim.compactions += result.rewritten
        sim.log.append(f"{name} compacts its file ({result.dropped})")
        return
    t = sim.transport(name)
    # A crash before the replace, or a replace that fails cleanly; the lost reply of a
    # replace that landed is issue 13 item 9 (see the xfail below), not armed here.
    fault = None
    if faulty and sim.rng.random() < 0.3:
        fault = sim.rng.choice([Fault("crash", sim.rng.randint(1, 4)), Fault("torn", 1)])
    t.arm(fault)
    try:
        sizes = compact_own_hub_file(
            memory=MEMORY,
            remote=REMOTE,
            transport=t,
            replica=name,
            state_dir=StateDir(sim.state(name)),
            horizon=round(HORIZON_DAYS * 86_400 * SECOND),
            acknowledged=ack,
            now=now,
            local=sim.path(name),  # weighed against the local file, as the daemon does
        )
    except (Crash, TransportError):
        sim.log.append(f"{name} hub compaction failed ({fault})")
        return
    finally:
        t.arm(None)
    sim.compactions += sizes is not None
    sim.log.append(f"{name} compacts its hub file: {sizes}")


FAULT_KINDS = ("crash", "lost-reply", "torn", "duplicate", "stale-listing")


def _step(sim: Sim, faults: tuple[str, ...]) -> None:
    rng = sim.rng
    name = rng.choice(sim.names)
    roll = rng.random()
    # Time goes on: mostly seconds, sometimes an hour (past the tombstone horizon).
    sim.time += rng.choice((SECOND, 7 * SECOND, 90 * SECOND, 3600 * SECOND))
    if roll < 0.45:
        _write(sim, name)
    elif roll < 0.47 and faults:
        # The state directory is a cache: losing it must cost a re-read, nothing more.
        shutil.rmtree(sim.state(name), ignore_errors=True)
        sim.faults += 1
        sim.log.append(f"{name} loses its state directory")
    elif roll < 0.49 and faults:
        # A clock stepped back (an NTP correction, a VM restored): up to an hour.
        sim.skew[name] -= rng.choice((1, 60, 3600)) * SECOND
        sim.faults += 1
        sim.log.append(f"{name}'s clock steps back: skew {sim.skew[name] // SECOND} s")
    elif roll < 0.9:
        fault = None
        if faults and rng.random() < 0.35:
            fault = sim.transport(name).draw(rng, faults)
        report = sim.sync(name, fault)
        fired = "crashed" if report is None else f"error: {report.error}"
        sim.log.append(f"{name} syncs ({fault}): {fired}")
    else:
        _compact(sim, name, bool(faults))


def _heal(sim: Sim) -> list[SyncReport]:
    """Fault-free rounds by everyone until one moves nothing; then one more (idempotence)."""
    reports: list[SyncReport] = []
    for _ in range(8):
        sim.time += 5 * SECOND
        moved = 0
        for name in sim.rng.sample(sim.names, len(sim.names)):
            report = sim.sync(name)
            assert report is not None
            assert report.ok, f"{sim.where()}: {name} cannot heal: {report.error}"
            moved += report.pulled_records + report.pushed_records
            reports.append(report)
        if not moved:
            return reports
    raise AssertionError(f"{sim.where()}: still moving records after 8 rounds of healing")


def _key(view: MemoryView) -> list[tuple[str, int, bytes]]:
    return [(r.id, r.ts, canonical(r)) for r in view.records]


def _hub_bytes(sim: Sim) -> dict[tuple[str, str], bytes]:
    return {k: bytes(v) for k, v in sim.hub.files.items()}


def run(
    seed: int,
    root: Path,
    *,
    faults: tuple[str, ...] = FAULT_KINDS,
    steps: int = STEPS,
    step: Callable[[Sim, tuple[str, ...]], None] = _step,
) -> Sim:
    rng = random.Random(seed)
    names = [f"r{i}" for i in range(rng.randint(3, 5))]
    # Clocks a few minutes apart, and now and then one hours off (less than the day past
    # which a merge holds a record as dated in the future: held records converge late).
    skew = {
        n: rng.choice((rng.randint(-300, 300), rng.randint(-300, 300), rng.randint(-11, 11) * 3600))
        * SECOND
        for n in names
    }
    sim = Sim(seed, root, rng, names, skew, steps=steps)
    for name in names:
        Memory.open(sim.path(name), now=sim.now(name))
    for _ in range(steps):
        step(sim, faults)
    sim.faults += sum(t.fired for t in sim.views.values())
    _heal(sim)
    check(sim)
    return sim


def check(sim: Sim) -> None:
    where = sim.where()
    now = max(sim.now(n) for n in sim.names)
    oracle = sim.root / "oracle.jsonl"
    oracle.write_bytes(header_line(T0) + b"".join(raw + b"\n" for raw in sim.acked))
    expected = view_of([oracle], now)
    assert expected.bad == []
    trail = "\n".join(sim.log[-25:])
    views = {n: view_of([sim.path(n)], now) for n in sim.names}
    for name, view in views.items():
        assert _key(view) == _key(expected), (
            f"{where}: {name}'s view is not the view of everything acknowledged\n"
            f"missing: {sorted({r.id for r in expected.records} - {r.id for r in view.records})}"
            f"\nextra: {sorted({r.id for r in view.records} - {r.id for r in expected.records})}"
            f"\nlast steps:\n{trail}"
        )
    ids = {r.id for r in expected.records}
    for rid, writer in sim.adds.items():
        if rid not in sim.gone:
            assert rid in ids, f"{where}: {rid}, added on {writer}, was lost"
    for rid in sim.gone:
        assert rid not in ids, f"{where}: {rid} was forgotten or superseded, and came back"
    # Bad lines stay where they were written: never in the hub, never on another replica.
    hub = b"\n".join(_hub_bytes(sim).values())
    for writer, line in sim.bad:
        assert line not in hub, f"{where}: a bad line of {writer} reached the hub: {line[:60]!r}"
        for name in sim.names:
            if name != writer:
                assert line not in sim.path(name).read_bytes(), (
                    f"{where}: a bad line of {writer} reached {name}: {line[:60]!r}"
                )
    # Nothing twice in any hub file or local file.
    for (_, fname), data in _hub_bytes(sim).items():
        if fname.endswith(".jsonl"):
            records = [raw for raw in data.split(b"\n")[:-1] if type(classify(raw)) is Record]
            twice = [raw for raw, n in collections.Counter(records).items() if n > 1]
            assert not twice, f"{where}: in hub {fname}, twice: {twice}\n" + "\n".join(sim.log)
    # Idempotence: one more round moves nothing and writes nothing to the hub files.
    before = {k: v for k, v in _hub_bytes(sim).items() if k[1].endswith(".jsonl")}
    locals_before = {n: sim.path(n).read_bytes() for n in sim.names}
    for name in sim.names:
        report = sim.sync(name)
        assert report is not None
        assert report.ok, f"{where}: {report.error}"
        assert report.pushed_bytes == report.pulled_records == 0, f"{where}: {report}"
    after = {k: v for k, v in _hub_bytes(sim).items() if k[1].endswith(".jsonl")}
    assert after == before, f"{where}: a quiet round changed the hub"
    assert {n: sim.path(n).read_bytes() for n in sim.names} == locals_before, where


@pytest.mark.parametrize("seed", SEEDS)
def test_simulation(seed: int, tmp_path: Path) -> None:
    sim = run(seed, tmp_path)
    assert sim.acked, f"seed {seed}: nothing was written"


def test_the_campaign_does_what_it_says(tmp_path: Path) -> None:
    """The schedule really injects faults and compacts, and really drops tombstones: a
    campaign that never hit anything would pass for the wrong reason."""
    faults = compactions = 0
    for seed in range(3):
        sim = run(1000 + seed, tmp_path / str(seed), steps=80)
        faults += sim.faults
        compactions += sim.compactions
    assert faults >= 20
    assert compactions >= 3


def test_the_oracle_catches_a_lost_record(tmp_path: Path) -> None:
    """`check` is not vacuous: a record acknowledged but removed from every replica fails
    it (as a lost push would)."""
    sim = run(7, tmp_path, steps=10)
    sim.acked.append(
        json.dumps(
            {"id": "lost0000", "kind": "fact", "text": "t", "created_at": format_ts(T0)}
        ).encode()
    )
    sim.adds["lost0000"] = "r0"
    with pytest.raises(AssertionError, match="seed 7"):
        check(sim)


@pytest.mark.parametrize("kind", ["lost reply", "killed before saving"])
def test_a_crash_right_after_compacting_our_hub_file_is_no_clash(tmp_path: Path, kind: str) -> None:
    """Our hub file is replaced by its compaction, and then the reply is lost (or the
    process dies before saving its state): the next passes must go on pushing."""
    sim = Sim(0, tmp_path, random.Random(0), ["a", "b"], {"a": 0, "b": 0})
    mem = Memory.open(sim.path("a"), now=sim.now("a"))
    Memory.open(sim.path("b"), now=sim.now("b"))
    for i in range(6):
        old = mem.add("lesson", f"Version {i}.", now=sim.now("a"))
        sim.time += SECOND
        mem.forget(old.id, now=sim.now("a"))
    for name in ("a", "b", "a", "b", "a"):
        report = sim.sync(name)
        assert report is not None
        assert report.ok, report.error
    state = sim.state("a") / "sync" / MEMORY / f"{REMOTE}.json"
    saved = state.read_bytes()
    t = sim.transport("a")
    t.arm(Fault("lost-reply", 1) if kind == "lost reply" else None)
    try:
        sizes = compact_own_hub_file(
            memory=MEMORY,
            remote=REMOTE,
            transport=t,
            replica="a",
            state_dir=StateDir(sim.state("a")),
            horizon=round(HORIZON_DAYS * 86_400 * SECOND),
            acknowledged=acknowledged_for(StateDir(sim.state("a")), MEMORY, [REMOTE], "a"),
            now=sim.now("a") + 3600 * SECOND,
        )
        assert sizes is not None
    except TransportError:
        assert kind == "lost reply"
    finally:
        t.arm(None)
    assert t.fired == (kind == "lost reply")
    if kind == "killed before saving":
        # What a kill between the replace and the state's save leaves (issue 24): the old
        # state, and the intent saved before the replace (a real kill: test_own_replace.py).
        intents = sim.state("a") / "sync" / MEMORY / f"{REMOTE}.replacing"
        assert not intents.exists()  # spent by the save that the kill would have prevented
        now_there = t.read(MEMORY, "a.jsonl", 0, t.size(MEMORY, "a.jsonl") or 0)
        save_replace_intent(StateDir(sim.state("a")), MEMORY, REMOTE, now_there)
    state.write_bytes(saved)  # the old state
    added = mem.add("fact", "Written after the hub file was compacted.", now=sim.now("a"))
    for name in ("a", "b"):
        report = sim.sync(name)
        assert report is not None
        assert report.ok, f"{name}: {report.error}"
    assert added.id in {r.id for r in view_of([sim.path("b")]).records}


def test_a_lost_state_with_a_stale_listing_pushes_nothing_twice(tmp_path: Path) -> None:
    """Found by the campaign (a state directory lost, then a listing from an attribute
    cache): the pass re-learns what our hub file holds by reading it up to the size the
    listing gives, then adopts the file at its real, larger size; the lines in between
    must count as held, not be pushed again."""
    shutil.rmtree(tmp_path, ignore_errors=True)
    sim = Sim(0, tmp_path, random.Random(0), ["a"], {"a": 0})
    mem = Memory.open(sim.path("a"), now=sim.now("a"))
    mem.add("fact", "First.", now=sim.now("a"))
    for _ in range(2):  # the second pass lists a.jsonl holding "First." only
        assert (report := sim.sync("a")) is not None
        assert report.ok
    mem.add("fact", "Second.", now=sim.now("a"))
    assert (report := sim.sync("a")) is not None
    assert report.ok
    assert report.pushed_records == 1
    shutil.rmtree(sim.state("a"))  # a cache: losing it must cost a re-read, nothing more
    assert (report := sim.sync("a", Fault("stale-listing", 2))) is not None
    assert report.ok, report.error
    assert sim.transport("a").fired == 1
    data = bytes(sim.hub.files[(MEMORY, "a.jsonl")])
    records = [raw for raw in data.split(b"\n")[:-1] if type(classify(raw)) is Record]
    assert len(records) == len(set(records)) == 2, data.decode()


def test_a_peer_hub_file_rewritten_after_a_tombstone_went_brings_nothing_back(
    tmp_path: Path,
) -> None:
    """Found by the campaign (seed 3 over 80, later 120, steps), here without any fault: `a` adds X,
    `b` forgets it; both read everything; past the horizon `b` compacts its file (the
    tombstone and X go, acknowledged by `a`); then `a` compacts its own hub file, which
    keeps X's entry (the tombstone is in `b`'s hub file, not `a`'s); `b` reads the
    rewritten file from the start and merged X back. A peer file read again from its
    start now skips the lines this replica has met in the hub before."""
    sim = Sim(0, tmp_path, random.Random(0), ["a", "b"], {"a": 0, "b": 0})
    a = Memory.open(sim.path("a"), now=sim.now("a"))
    b = Memory.open(sim.path("b"), now=sim.now("b"))
    x = a.add("fact", "Doomed.", now=sim.now("a")).id
    y = a.add("fact", "Forgotten by its writer.", now=sim.now("a")).id  # a's hub file shrinks

    def sync(name: str) -> None:
        sim.time += SECOND
        report = sim.sync(name)
        assert report is not None
        assert report.ok, report.error

    for name in "ab":
        sync(name)
    b.forget(x, now=sim.now("b"))
    a.forget(y, now=sim.now("a"))
    for name in "abab":
        sync(name)
    sim.time += 3600 * SECOND  # past the horizon
    # b's own hub file weighed against its local file first, as `compact_memory` does:
    # only then may the local file drop the tombstones (issue 24, residual (b)).
    compact_own_hub_file(
        memory=MEMORY,
        remote=REMOTE,
        transport=sim.transport("b"),
        replica="b",
        state_dir=StateDir(sim.state("b")),
        horizon=round(HORIZON_DAYS * 86_400 * SECOND),
        acknowledged=None,
        now=sim.now("b"),
        local=sim.path("b"),
    )
    dropped = compact_file(
        sim.path("b"),
        now=sim.now("b"),
        horizon_days=HORIZON_DAYS,
        quiet_seconds=0,
        grace_seconds=0,
        acknowledged=acknowledged_for(StateDir(sim.state("b")), MEMORY, [REMOTE], "b"),
    ).dropped
    assert dropped.get("old tombstone") == 2  # x's and y's: a read both
    sizes = compact_own_hub_file(
        memory=MEMORY,
        remote=REMOTE,
        transport=sim.transport("a"),
        replica="a",
        state_dir=StateDir(sim.state("a")),
        horizon=round(HORIZON_DAYS * 86_400 * SECOND),
        acknowledged=acknowledged_for(StateDir(sim.state("a")), MEMORY, [REMOTE], "a"),
        now=sim.now("a"),
    )
    assert sizes is not None
    sync("b")
    assert x not in {r.id for r in view_of([sim.path("a")]).records}
    assert x not in {r.id for r in view_of([sim.path("b")]).records}, "x came back on b"


def test_simulation_long_run(tmp_path: Path) -> None:
    """Seed 1 over 120 steps (of seeds 0 to 29, the one that fails so): the campaign's own
    finding of the resurrection above. A change to the schedule changes which seed that
    is: look for one again (the seeds of `test_simulation` are shorter and all pass)."""
    run(1, tmp_path, steps=120)
