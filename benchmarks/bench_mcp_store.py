"""Issue 20: the MCP server's reads (recall, the prompt resource) on a large file.

    python benchmarks/bench_mcp_store.py [--size 100k] [--rounds 20]

On a copy of the file (genmem.py), in a fresh state directory, two server processes one
after the other, each built and driven through the SDK's in-process client: the first
`recall` (the first server: cold, the view and the recall index are built; the second,
after `memsync add` appended one record: warm, as a host starting a new session finds the
state directory), then `--rounds` rounds of: `memsync add` appends one record from another
process, then one `recall` of a common word and one read of the global prompt resource.
Prints for each server the first call's time, the median and the worst of the rounds'
calls, and its peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import ROOT, memory

sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="100k")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # a server's copy
    args = ap.parse_args()
    if args.serve is None:
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "m.jsonl"
            shutil.copyfile(memory(args.size), file)
            env = {**os.environ, "XDG_STATE_HOME": str(Path(tmp) / "state")}
            for which in ("cold", "warm"):
                print(which, end=" ", flush=True)
                cmd = [sys.executable, __file__, "--size", args.size, "--serve", str(file)]
                subprocess.run([*cmd, "--rounds", str(args.rounds)], check=True, env=env)
                _add(file, env)
        return
    serve(Path(args.serve), args)


def _add(file: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "memsync", "add", str(file), "--kind", "fact", "--text", "x"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)


def serve(file: Path, args: argparse.Namespace) -> None:
    from mcp import Client

    from memsync.local.statedir import StateDir
    from memsync.mcp_server import build_server

    server = build_server(file, "m", StateDir.of())

    async def drive() -> None:
        async with Client(server) as client:
            started = time.perf_counter()
            await client.call_tool("recall", {"query": "retry"})
            first = time.perf_counter() - started
            recalls: list[float] = []
            prompts: list[float] = []
            for _ in range(args.rounds):
                _add(file, dict(os.environ))
                started = time.perf_counter()
                await client.call_tool("recall", {"query": "retry"})
                recalls.append(time.perf_counter() - started)
                started = time.perf_counter()
                await client.read_resource("memsync://m/prompt/global")
                prompts.append(time.perf_counter() - started)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{args.size}: first recall {first * 1000:.0f} ms; after each append: "
                f"recall median {statistics.median(recalls) * 1000:.0f} ms, "
                f"max {max(recalls) * 1000:.0f} ms; prompt resource median "
                f"{statistics.median(prompts) * 1000:.0f} ms, max "
                f"{max(prompts) * 1000:.0f} ms; peak RSS {rss:.0f} MB"
            )

    anyio.run(drive)


if __name__ == "__main__":
    main()
