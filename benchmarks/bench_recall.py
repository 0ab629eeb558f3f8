"""Recall and the MCP server (issue 10): recall per query and index build time at 10,000
and 100,000 entries; a remember -> recall round trip through stdio (p50, p99); the import
time of `memsync --help` with and without the MCP SDK installed.

    MEMSYNC_SHARED=/work/shared python benchmarks/bench_recall.py [--queries 200] [--trips 200]

The import-time part compiles the package first (`python -m compileall`): a machine that
sets PYTHONDONTWRITEBYTECODE=1 would otherwise measure compilation, not import.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, generated, machine

QUERIES = [
    "retry",
    "retries timeout",
    "prefers short answers",
    "deploy staging",
    "cache bucket",
    "flaky network",
    "monday",
    "rate limit api",
]


def bench_recall(n: int, queries: int) -> None:
    from memsync.local.fulltext import TextIndex, live_cache, recall
    from memsync.local.statedir import StateDir

    path = generated(f"recall-{n}.jsonl", "--entries", str(n), "--seed", "10")
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        started = time.perf_counter()
        with TextIndex(path.resolve(), StateDir(state).recall_index(path)) as index:
            index.refresh()
        build = time.perf_counter() - started
        started = time.perf_counter()
        live_cache(path).index()
        fold = time.perf_counter() - started
        recall(path, "warm", state_dir=state)
        times: dict[str, list[float]] = {q: [] for q in QUERIES}
        for i in range(queries):
            q = QUERIES[i % len(QUERIES)]
            t = time.perf_counter()
            recall(path, q, state_dir=state, limit=10)
            times[q].append(time.perf_counter() - t)
        scan: list[float] = []
        for q in QUERIES:
            t = time.perf_counter()
            recall(path, q, state_dir=state, limit=10, use_fts=False)
            scan.append(time.perf_counter() - t)
    allq = [x for v in times.values() for x in v]
    print(f"\n## recall, {n:,} entries ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"FTS5 index build from scratch: {build:.2f} s; view summary (first read): {fold:.2f} s")
    print(
        f"recall per query, FTS5, limit 10: median {statistics.median(allq) * 1e3:.2f} ms, "
        f"p99 {sorted(allq)[int(len(allq) * 0.99) - 1] * 1e3:.2f} ms ({len(allq)} queries)"
    )
    for q, v in times.items():
        print(f"  {q!r}: median {statistics.median(v) * 1e3:.2f} ms")
    print(f"recall per query, fallback scan: median {statistics.median(scan) * 1e3:.1f} ms")


def bench_round_trip(trips: int) -> None:
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rt.jsonl"
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memsync", "mcp", str(path)],
            env={"XDG_STATE_HOME": tmp},
        )
        samples: list[float] = []

        async def run() -> None:
            async with Client(params, read_timeout_seconds=60) as client:
                for i in range(trips):
                    word = f"zq{i}x"
                    t = time.perf_counter()
                    await client.call_tool(
                        "remember", {"kind": "fact", "text": f"Round trip {word}."}
                    )
                    r = await client.call_tool("recall", {"query": word, "limit": 1})
                    samples.append(time.perf_counter() - t)
                    assert r.structured_content is not None, r
                    assert r.structured_content["entries"], r

        anyio.run(run)
    samples.sort()
    print(f"\n## remember -> recall round trip through stdio ({trips} trips, growing file)")
    print(
        f"p50 {samples[len(samples) // 2] * 1e3:.2f} ms, "
        f"p99 {samples[int(len(samples) * 0.99) - 1] * 1e3:.2f} ms"
    )


def _import_ms(python: str, runs: int = 15) -> tuple[float, float]:
    """Median wall time of `memsync --help` and the median cumulative import time of
    memsync.cli (from -X importtime), in ms."""
    walls: list[float] = []
    imports: list[float] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(
            [python, "-m", "memsync", "--help"], env=env, check=True, stdout=subprocess.DEVNULL
        )
        walls.append(time.perf_counter() - t)
        err = subprocess.run(
            [python, "-X", "importtime", "-c", "import memsync.cli"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stderr
        for line in err.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[2].strip() == "memsync.cli":
                imports.append(int(parts[1]) / 1000)
    return statistics.median(walls) * 1e3, statistics.median(imports)


def bench_import_time() -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memsync")], check=True)
    with_sdk = _import_ms(sys.executable)
    with tempfile.TemporaryDirectory() as tmp:
        # A venv with memsync's dependencies but not the MCP SDK: the current venv's
        # site-packages minus mcp, by a .pth file and a meta-path blocker would measure
        # something else; so a real second venv, sharing nothing.
        bare = Path(tmp) / "venv"
        venv.create(bare, with_pip=True, system_site_packages=False)
        py = str(bare / "bin" / "python")
        subprocess.run(
            [py, "-m", "pip", "install", "-q", "-e", str(ROOT)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        probe = subprocess.run([py, "-c", "import mcp"], capture_output=True, check=False)
        assert probe.returncode != 0, "the bare venv must not have the MCP SDK"
        subprocess.run([py, "-m", "compileall", "-q", str(bare / "lib")], check=True)
        without = _import_ms(py)
    print("\n## import time of `memsync --help` (bytecode compiled first)")
    print(f"with the mcp extra installed: --help {with_sdk[0]:.0f} ms, import memsync.cli "
          f"{with_sdk[1]:.0f} ms")  # fmt: skip
    print(f"without it:                   --help {without[0]:.0f} ms, import memsync.cli "
          f"{without[1]:.0f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--trips", type=int, default=200)
    parser.add_argument("--skip-import", action="store_true")
    args = parser.parse_args()
    print(machine())
    for n in (10_000, 100_000):
        bench_recall(n, args.queries)
    bench_round_trip(args.trips)
    if not args.skip_import:
        bench_import_time()


if __name__ == "__main__":
    main()
