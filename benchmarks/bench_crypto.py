"""Hub encryption (issue 12): its cost per line, and what it adds to a sync over SSH.

    python benchmarks/bench_crypto.py [--entries 100000] [--runs 5]
    python benchmarks/bench_crypto.py --entries 1000000      # the issue's first push

Three measurements, plain and encrypted side by side in the same run:

1. **per line**: `LineCipher.encrypt` and `decrypt` of genmem-like records (about 250
   bytes), in this process; the median over `--runs` passes of 20,000 lines, in
   microseconds per line; and the hub bytes per record, plain and encrypted.
2. **one new record over SSH**: a memory of `--entries` records already in sync through
   the real sshd on 127.0.0.1 (tests/sshd.py, through bench_sync's byte-counting relay);
   one record appended; one pass (`sync_config`) on a connection kept open (the daemon's
   case), and one pass that connects (as `memsync sync` does); wall time and bytes on the
   wire, medians over `--runs`.
3. **first push**: the first pass of a replica holding `--entries` records (the same
   file), into an empty hub over SSH: wall time, bytes on the wire, hub file size.

The memory file is made by tests.helpers.sync.write_records (unique ids, ~250-byte lines),
in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_sync import Relay, new_line
from common import machine

from memsync.config import load_config
from memsync.config.wiring import open_remote, sync_config
from memsync.hub.crypto import LineCipher
from memsync.hub.keys import Keyring, new_master_key
from tests.helpers.sshd import SshdServer, start_sshd
from tests.helpers.sync import write_records


def per_line(runs: int) -> dict[str, float]:
    cipher = LineCipher(new_master_key(), "notes")
    lines = [new_line(i).rstrip(b"\n") for i in range(20_000)]
    enc: list[float] = []
    dec: list[float] = []
    sealed: list[bytes] = []
    for _ in range(runs):
        started = time.perf_counter()
        sealed = [cipher.encrypt(raw) for raw in lines]
        enc.append((time.perf_counter() - started) / len(lines) * 1e6)
        started = time.perf_counter()
        for raw in sealed:
            cipher.decrypt(raw)
        dec.append((time.perf_counter() - started) / len(lines) * 1e6)
    return {
        "encrypt_us": statistics.median(enc),
        "decrypt_us": statistics.median(dec),
        "plain_bytes": statistics.mean(len(raw) + 1 for raw in lines),
        "hub_bytes": statistics.mean(len(raw) + 1 for raw in sealed),
    }


def write_config(
    root: Path, name: str, server: SshdServer, port: int, hub: Path, encrypt: bool
) -> Path:
    """A replica's config: its memory at <root>/<name>.jsonl, the hub over SSH through the
    relay, its own key file (all replicas of one mode share a key)."""
    url = f"ssh://{server.user}@127.0.0.1:{port}{hub}"
    text = "\n".join(
        [
            f"state_dir = {json.dumps(str(root / (name + '-state')))}",
            f"replica = {json.dumps(name)}",
            f"key_file = {json.dumps(str(root / 'keys'))}",
            "[[memory]]",
            'name = "notes"',
            f"path = {json.dumps(str(root / (name + '.jsonl')))}",
            "[[remote]]",
            'name = "vm"',
            f"url = {json.dumps(url)}",
            f"identity_file = {json.dumps(str(server.client_key))}",
            f"known_hosts = {json.dumps(str(root / 'known_hosts'))}",
            "accept_new_host_key = true",  # the relay's port is not in the server's file
            f"encrypt = {'true' if encrypt else 'false'}",
            "",
        ]
    )
    path = root / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def one_pass(config_path: Path, relay: Relay) -> tuple[float, int, int]:
    """One pass that connects (as `memsync sync`): seconds, wire bytes, records pushed."""
    config = load_config(config_path)
    relay.reset()
    started = time.perf_counter()
    (report,) = sync_config(config)
    seconds = time.perf_counter() - started
    time.sleep(0.05)
    if report.error:
        sys.exit(f"sync failed: {report.error}")
    return seconds, relay.total, report.pushed_records


def bench_mode(
    work: Path, server: SshdServer, relay: Relay, entries: int, runs: int, encrypt: bool
) -> dict[str, float]:
    mode = "encrypted" if encrypt else "plain"
    root = work / mode
    root.mkdir()
    hub = work / f"hub-{mode}"
    hub.mkdir()
    Keyring(root / "keys", (new_master_key(),)).save()
    laptop = write_config(root, "laptop", server, relay.port, hub, encrypt)
    write_records(root / "laptop.jsonl", entries)
    print(f"{mode}: first push of {entries:,} records ...", file=sys.stderr)
    first_s, first_wire, pushed = one_pass(laptop, relay)
    assert pushed == entries, pushed
    hub_size = (hub / "notes" / "laptop.jsonl").stat().st_size
    one_pass(laptop, relay)  # settle: nothing new

    connect_s: list[float] = []
    connect_wire: list[int] = []
    for n in range(runs):
        with open(root / "laptop.jsonl", "ab") as f:
            f.write(new_line(n))
        seconds, wire, pushed = one_pass(laptop, relay)
        assert pushed == 1, pushed
        connect_s.append(seconds)
        connect_wire.append(wire)

    config = load_config(laptop)
    transport = open_remote(config.remote[0])
    open_s: list[float] = []
    open_wire: list[int] = []
    try:
        sync_config(config, transports={"vm": transport})
        for n in range(runs):
            with open(root / "laptop.jsonl", "ab") as f:
                f.write(new_line(1000 + n))
            relay.reset()
            started = time.perf_counter()
            (report,) = sync_config(config, transports={"vm": transport})
            open_s.append(time.perf_counter() - started)
            time.sleep(0.05)
            open_wire.append(relay.total)
            assert report.pushed_records == 1, report
    finally:
        transport.close()
    return {
        "first_push_s": first_s,
        "first_push_wire": first_wire,
        "hub_file_bytes": hub_size,
        "one_record_connect_ms": statistics.median(connect_s) * 1000,
        "one_record_connect_wire": statistics.median(connect_wire),
        "one_record_open_ms": statistics.median(open_s) * 1000,
        "one_record_open_wire": statistics.median(open_wire),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    print(f"machine: {machine()}")
    print(f"command: python benchmarks/bench_crypto.py --entries {args.entries} --runs {args.runs}")
    cost = per_line(args.runs)
    print(
        f"per line (~{cost['plain_bytes']:.0f}-byte records): encrypt "
        f"{cost['encrypt_us']:.2f} us, decrypt {cost['decrypt_us']:.2f} us; hub bytes per "
        f"record {cost['plain_bytes']:.0f} plain, {cost['hub_bytes']:.0f} encrypted"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-crypto-"))
    server = start_sshd(work / "sshd")
    relay = Relay(server.port)
    try:
        results = {
            mode: bench_mode(work, server, relay, args.entries, args.runs, mode == "encrypted")
            for mode in ("plain", "encrypted")
        }
    finally:
        relay.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'':36} {'plain':>14} {'encrypted':>14}")
    rows = [
        ("first push: seconds", "first_push_s", "{:.2f}"),
        ("first push: bytes on the wire", "first_push_wire", "{:,.0f}"),
        ("first push: hub file bytes", "hub_file_bytes", "{:,.0f}"),
        ("one new record, connecting: ms", "one_record_connect_ms", "{:.0f}"),
        ("one new record, connecting: wire", "one_record_connect_wire", "{:,.0f}"),
        ("one new record, open conn.: ms", "one_record_open_ms", "{:.1f}"),
        ("one new record, open conn.: wire", "one_record_open_wire", "{:,.0f}"),
    ]
    for label, key, fmt in rows:
        plain, enc = results["plain"][key], results["encrypted"][key]
        print(f"{label:36} {fmt.format(plain):>14} {fmt.format(enc):>14}")


if __name__ == "__main__":
    main()
