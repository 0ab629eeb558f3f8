"""Helpers for the sync tests (and the daemon's): replicas as real config files and state
directories on one machine, sharing a hub; random workloads; comparisons of views.

    hub = tmp_path / "hub"
    a = make_replica(tmp_path, "a", str(hub))             # a folder hub
    b = make_replica(tmp_path, "b", **ssh_remote(server, hub))   # the same hub over SSH
    a.memory().add("fact", "The build needs Python 3.11.")
    assert a.cli("sync").rc == 0
    assert_converged([a, b])

Each replica is `<tmp>/<name>/` holding `config.toml`, `memory.jsonl` (the local memory
file) and `state/` (its state directory); its replica id is given in the config, so a
deleted state directory keeps the id (the case DESIGN.md's "a cache" promise is about).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync import Memory
from memsync.cli import main
from memsync.config import load_config
from memsync.config.wiring import sync_config
from memsync.core.lines import Header, classify
from memsync.core.records import Record, canonical
from memsync.core.timestamps import format_ts
from memsync.hub.sync import SyncReport
from memsync.hub.transports import Transport
from memsync.local.fresh import header_line, now_us
from memsync.local.reading import MemoryView, view_of
from tests.helpers.sshd import SshdServer

__all__ = [
    "MEMORY",
    "CliResult",
    "Replica",
    "assert_converged",
    "assert_unique",
    "assert_unique_records",
    "bad_lines",
    "classified",
    "converge",
    "entry_line",
    "forget_state_costs_a_reread",
    "hub_file",
    "hub_files",
    "hub_snapshot",
    "make_replica",
    "random_ops",
    "record_lines",
    "ssh_remote",
    "sync_rounds",
    "view_key",
    "write_records",
]

MEMORY = "notes"
"""The memory name every replica made here shares (the hub folder `<hub>/notes/`)."""


@dataclass(frozen=True)
class CliResult:
    """What one in-process run of `memsync ...` gave."""

    rc: int
    out: str
    err: str

    @property
    def reports(self) -> list[dict[str, Any]]:
        """The reports of a `sync --json` run."""
        doc: list[dict[str, Any]] = json.loads(self.out)
        return doc


@dataclass
class Replica:
    """One machine: its config file, local memory file and state directory."""

    name: str
    replica_id: str
    root: Path
    config: Path
    path: Path
    state_dir: Path
    remotes: dict[str, str] = field(default_factory=dict)

    def memory(self) -> Memory:
        """The local memory file (created with a header when missing)."""
        return Memory.open(self.path)

    def cli(self, *args: str) -> CliResult:
        """Run `memsync <args> --config <this config>` in this process."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([*args, "--config", str(self.config)])
        return CliResult(rc, out.getvalue(), err.getvalue())

    def sync(self, *args: str) -> list[dict[str, Any]]:
        """`memsync sync --json` in this process; the reports, after checking it succeeded."""
        result = self.cli("sync", "--json", *args)
        assert result.rc == 0, f"{self.name}: memsync sync failed: {result.out}{result.err}"
        return result.reports

    def sync_config(
        self, *, transports: dict[str, Transport] | None = None, now: int | None = None
    ) -> list[SyncReport]:
        """One pass through the library (`sync_config`), with optional transports."""
        return sync_config(load_config(self.config), transports=transports, now=now)

    def view(self, now: int | None = None) -> MemoryView:
        return view_of([self.path], now)

    def forget_state(self) -> None:
        """Delete the state directory (a cache: it must cost a re-read and nothing else)."""
        shutil.rmtree(self.state_dir, ignore_errors=True)


def _toml(value: object) -> str:
    """A TOML value: JSON's strings, numbers and booleans are TOML's too."""
    return json.dumps(str(value) if isinstance(value, Path) else value)


def make_replica(
    tmp: Path,
    name: str,
    hub_url: str | None = None,
    *,
    replica_id: str | None = None,
    memory_name: str = MEMORY,
    remotes: dict[str, dict[str, Any]] | None = None,
    **ssh_opts: Any,
) -> Replica:
    """Write `<tmp>/<name>/config.toml` for one replica and return its paths.

    `hub_url` is the remote "hub" (a folder path, file:// or ssh:// url); `ssh_opts` are
    its SSH keys (`identity_file`, `known_hosts`, `accept_new_host_key`, ...). `remotes`
    adds more remotes, by name: each a table of keys, at least `url`. The replica id is
    `replica_id` (default: `name`).
    """
    root = tmp / name
    root.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict[str, Any]] = {}
    if hub_url is not None:
        tables["hub"] = {"url": hub_url, **ssh_opts}
    tables.update(remotes or {})
    rid = replica_id or name
    lines = [
        f"state_dir = {_toml(root / 'state')}",
        f"replica = {_toml(rid)}",
        "",
        "[[memory]]",
        f"name = {_toml(memory_name)}",
        f"path = {_toml(root / 'memory.jsonl')}",
    ]
    for remote_name, keys in tables.items():
        lines += ["", "[[remote]]", f"name = {_toml(remote_name)}"]
        lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    config = root / "config.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_config(config)  # fail here, not in the middle of a test, if it is wrong
    return Replica(
        name=name,
        replica_id=rid,
        root=root,
        config=config,
        path=root / "memory.jsonl",
        state_dir=root / "state",
        remotes={k: str(v["url"]) for k, v in tables.items()},
    )


def ssh_remote(server: SshdServer, hub: Path) -> dict[str, Any]:
    """`make_replica` keyword arguments for the folder `hub` reached through `server`."""
    return {
        "hub_url": f"ssh://{server.user}@{server.host}:{server.port}{hub}",
        "identity_file": server.client_key,
        "known_hosts": server.known_hosts,
    }


# --- reading files --------------------------------------------------------------------


def classified(path: Path) -> tuple[list[bytes], list[bytes]]:
    """The complete lines of `path` that are valid records, and those that are bad lines
    (headers, blank lines and a torn last line left out)."""
    data = path.read_bytes()
    records: list[bytes] = []
    bad: list[bytes] = []
    for raw in data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]:
        parsed = classify(raw)
        if type(parsed) is Record:
            records.append(raw)
        elif raw.strip() and not isinstance(parsed, Header):
            bad.append(raw)
    return records, bad


def record_lines(path: Path) -> list[bytes]:
    """The complete lines of `path` that are valid records."""
    return classified(path)[0]


def bad_lines(path: Path) -> list[bytes]:
    """The complete lines of `path` that are neither records, headers nor blank."""
    return classified(path)[1]


def assert_unique(records: list[bytes], where: object) -> None:
    """No line appears twice in `records` (the record lines of `where`), except rule 14's
    repeated winner: a merge that appends a beaten record that must travel (an older
    tombstone, a beaten superseding entry) appends the line that beats it again after it.
    So a repeat is allowed only when another record of the same id came in between."""
    last_seen: dict[bytes, int] = {}
    last_of_id: dict[str, int] = {}
    repeated = []
    for index, raw in enumerate(records):
        rid = str(json.loads(raw)["id"])
        previous = last_seen.get(raw)
        if previous is not None and last_of_id[rid] == previous:
            repeated.append(raw[:80])  # nothing of its id in between: a plain duplicate
        last_seen[raw] = last_of_id[rid] = index
    assert not repeated, f"{where}: {len(repeated)} record line(s) repeated, e.g. {repeated[:3]}"


def assert_unique_records(path: Path) -> None:
    """No valid record line appears twice in `path`."""
    assert_unique(record_lines(path), path)


def hub_file(hub: Path, replica: Replica | str, memory: str = MEMORY) -> Path:
    rid = replica if isinstance(replica, str) else replica.replica_id
    return hub / memory / f"{rid}.jsonl"


def hub_files(hub: Path, memory: str = MEMORY) -> list[Path]:
    """The replica files of one memory in a hub (sidecars left out)."""
    folder = hub / memory
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.startswith("."))


def view_key(view: MemoryView) -> list[tuple[str, int, bytes]]:
    """A view as (id, created_at instant, canonical content): equal for equal views even
    when two replicas hold the same record in two spellings (rule 7)."""
    return [(r.id, r.ts, canonical(r)) for r in view.records]


def assert_converged(replicas: Sequence[Replica], now: int | None = None) -> None:
    """Every replica has the same view, and it is the view of all local files together."""
    at = now_us() if now is None else now
    union = view_key(view_of([r.path for r in replicas], at))
    for r in replicas:
        assert view_key(r.view(at)) == union, f"{r.name}'s view differs from the union's"
        assert_unique_records(r.path)


# --- workloads -------------------------------------------------------------------------

_WORDS = (
    "the", "site", "blocks", "requests", "without", "a", "user", "agent", "prefer", "short",
    "answers", "retry", "after", "rate", "limit", "build", "needs", "python", "eleven", "use",
    "staging", "bucket", "tests", "are", "flaky", "on", "monday", "never", "force", "push",
    "to", "main", "ask", "before", "deleting", "files", "tables", "over", "prose",
)  # fmt: skip
_KINDS = ("preference", "lesson", "fact", "source", "avoid")


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."


def entry_line(
    rid: str,
    created_at: int | str,
    text: str = "A plain line.",
    *,
    kind: str = "fact",
    **extra: Any,
) -> bytes:
    """One valid entry line (without its "\\n"), as an agent might write it by hand."""
    ts = format_ts(created_at) if isinstance(created_at, int) else created_at
    obj = {"id": rid, "kind": kind, "text": text, "created_at": ts, **extra}
    return json.dumps(obj).encode()


def random_ops(rng: random.Random, replica: Replica, count: int, *, tag: str = "") -> None:
    """Append `count` random changes to a replica's local file: new entries through
    `Memory.add`, versions, tombstones and supersessions of ids it holds (its own or
    pulled), and plain `open(path, "a")` appends of valid lines (new ids, new versions,
    the same instant spelled another way)."""
    mem = replica.memory()
    for _ in range(count):
        live = [r for r in mem.view().records if not r.deleted]
        roll = rng.random()
        if live and roll < 0.15:
            mem.forget(rng.choice(live).id)
        elif live and roll < 0.25:
            # Only the person's word replaces the person's entry (rule 10; `supersede`
            # refuses an inferred one, issue 24 item 9).
            old = rng.choice(live)
            mem.supersede(old.id, _sentence(rng) + tag, source="user" if old.user else None)
        elif roll < 0.45:
            _plain_append(rng, replica.path, live, tag)
        else:
            mem.add(
                rng.choice(_KINDS),
                _sentence(rng) + tag,
                scope=rng.choice(("global", "github.com", "project:memsync")),
                source=rng.choice((None, "user", "session:x")),
                confidence=rng.choice((1.0, 0.5, 0.25)),
            )


def _plain_append(rng: random.Random, path: Path, live: list[Record], tag: str) -> None:
    """An agent appending without memsync: one `write()` of whole lines under O_APPEND."""
    now = now_us()
    roll = rng.random()
    # A new version of an id it holds, written by hand; or a new id.
    rid = rng.choice(live).id if live and roll < 0.4 else f"{rng.getrandbits(48):012x}"
    stamp = format_ts(now + rng.randint(1, 5_000_000))
    if roll > 0.8:  # an offset instead of Z, as another writer might spell it
        stamp = stamp.replace("Z", "+00:00")
    line = entry_line(rid, stamp, _sentence(rng) + tag, kind=rng.choice(_KINDS), note="kept")
    with open(path, "ab") as f:
        if f.tell() == 0:
            f.write(header_line(now))
        f.write(line + b"\n")


def write_records(path: Path, count: int, *, start: int = 0, text_bytes: int = 180) -> int:
    """Append `count` valid entries quickly (one write per 10,000 lines); return bytes
    written. Ids are `w<start+i>`; created_at goes up by 1 ms a record from 2026-01-01."""
    base = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
    pad = "x" * text_bytes
    written = 0
    with open(path, "ab") as f:
        if f.tell() == 0:
            written += f.write(header_line(base))
        for first in range(start, start + count, 10_000):
            block = b"".join(
                b'{"id": "w%d", "kind": "fact", "text": "Record %d %s", "created_at": "%s"}\n'
                % (i, i, pad.encode(), format_ts(base + i * 1000).encode())
                for i in range(first, min(first + 10_000, start + count))
            )
            written += f.write(block)
    return written


def sync_rounds(
    replicas: Sequence[Replica], rng: random.Random | None, rounds: int = 1
) -> list[list[dict[str, Any]]]:
    """`rounds` rounds of `memsync sync` on every replica (in a random order if `rng`);
    the reports of every run."""
    runs: list[list[dict[str, Any]]] = []
    for _ in range(rounds):
        order: Iterable[Replica] = replicas
        if rng is not None:
            order = rng.sample(list(replicas), len(replicas))
        runs += [r.sync() for r in order]
    return runs


# --- scenarios shared by the folder and SSH tests ----------------------------------------


def hub_snapshot(hub: Path, memory: str = MEMORY) -> dict[str, bytes]:
    """The bytes of every replica file of a memory in a hub."""
    return {p.name: p.read_bytes() for p in hub_files(hub, memory)}


def converge(replicas: Sequence[Replica], hub: Path, seed: int, *, rounds: int = 5) -> None:
    """Random appends on every replica (through `Memory` and plain appends), interleaved
    with `memsync sync` runs in a random order; then two full rounds, after which every
    view must be equal, and equal to the view of all local files together; then one more
    round, which must push no byte and pull no record anywhere (idempotence)."""
    rng = random.Random(seed)
    for n in range(rounds):
        for r in rng.sample(list(replicas), rng.randint(1, len(replicas))):
            random_ops(rng, r, rng.randint(0, 6), tag=f" ({r.name} {n})")
            r.sync()
    sync_rounds(replicas, rng, 2)
    assert_converged(replicas)
    assert len(replicas[0].view()) > 0
    for path in hub_files(hub):
        assert_unique_records(path)
    before = hub_snapshot(hub), [r.path.read_bytes() for r in replicas]
    for reports in sync_rounds(replicas, rng, 1):
        for report in reports:
            assert report["pushed_bytes"] == 0, report
            assert report["pushed_records"] == 0, report
            assert report["pulled_records"] == 0, report
    assert (hub_snapshot(hub), [r.path.read_bytes() for r in replicas]) == before


def forget_state_costs_a_reread(replicas: Sequence[Replica], hub: Path, seed: int) -> None:
    """After `converge`: one replica loses its state directory; its next sync re-reads the
    hub and changes nothing: same views, no byte added to any hub file or to its local
    file; then everyone goes on and converges again."""
    rng = random.Random(seed)
    lost = replicas[0]
    views = [view_key(r.view()) for r in replicas]
    hub_before, local_before = hub_snapshot(hub), lost.path.read_bytes()
    lost.forget_state()
    (report,) = lost.sync()
    assert report["pulled_records"] == 0, report
    assert report["pushed_records"] == 0, report
    assert report["pulled_bytes"] >= sum(len(b) for b in hub_before.values())  # the re-read
    assert hub_snapshot(hub) == hub_before
    assert lost.path.read_bytes() == local_before
    assert [view_key(r.view()) for r in replicas] == views
    for reports in sync_rounds(replicas, rng, 1):
        assert reports[0]["pushed_bytes"] == 0, reports
        assert reports[0]["pulled_records"] == 0, reports
    # Life goes on: new appends everywhere reach everyone, nothing twice.
    for r in replicas:
        random_ops(rng, r, 3, tag=f" ({r.name} after)")
    sync_rounds(replicas, rng, 2)
    assert_converged(replicas)
    for path in hub_files(hub):
        assert_unique_records(path)
