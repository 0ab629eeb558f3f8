"""Issue 20: the MCP server's calls on a large file, each after an append by another process.

    python benchmarks/bench_mcp_store.py [--size 100k] [--rounds 20] [--tree DIR]...

On a copy of the file (genmem.py), in a fresh state directory whose persistent view a
`memsync prompt --max-chars 4000` builds first, and its recall index a `memsync recall`
(warm, as a host starting a new session finds them): one server process per `--tree` (a
source tree of memsync, for example `git archive main | tar -x -C /tmp/base`; default:
this one), all alive at once, each started as `memsync mcp` starts it
(`mcp_server.start`: the views warmed in a thread) and driven through the SDK's in-process
client. Then `--rounds` rounds of: `memsync add` (this tree's) appends one record from another
process, then each server in turn (the order alternates between rounds, so that load on
the machine falls on every server alike) makes one call of each kind: `recall` of a
common word, a read of the global prompt resource, `remember`, the `memory` prompt (after
that append), `supersede` of what it remembered, `forget` of the new one. The servers
write the same file, so each call follows appends by other processes. Prints per server
its first recall and prompt (start-up: the views read), per call its median and p99
(with 20 rounds, p99 is the worst), then the server process's RSS now and at its peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, memory, until_gone

CALLS = ("recall", "prompt_resource", "remember", "memory_prompt", "supersede", "forget")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="100k")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--tree", action="append", default=None, help="memsync source tree")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # a server's file
    args = ap.parse_args()
    trees = [Path(t).resolve() for t in (args.tree or [str(ROOT)])]
    if args.serve is not None:
        serve(Path(args.serve), trees[0])
        return
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "m.jsonl"
        shutil.copyfile(memory(args.size), file)
        env = {**os.environ, "XDG_STATE_HOME": str(Path(tmp) / "state")}
        started = time.perf_counter()
        cmd = [sys.executable, "-m", "memsync", "prompt", str(file), "--max-chars", "4000"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
        answered = time.perf_counter() - started
        until_gone(cmd)  # the process it detached to write the store
        ready = time.perf_counter() - started
        print(
            f"{args.size}: `prompt` answered in {answered:.1f} s, its store ready in {ready:.1f} s"
        )
        cmd = [sys.executable, "-m", "memsync", "recall", str(file), "retry"]  # its index
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
        servers = [
            subprocess.Popen(
                [sys.executable, __file__, "--serve", str(file), "--tree", str(tree)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for tree in trees
        ]
        firsts = [_ask(s, "first") for s in servers]
        times: list[dict[str, list[float]]] = [{c: [] for c in CALLS} for _ in servers]
        for n in range(args.rounds):
            _add(file, env)
            order = list(range(len(servers)))
            for i in order if n % 2 == 0 else order[::-1]:
                for call, seconds in _ask(servers[i], "round").items():
                    times[i][call].append(seconds)
        for tree, server, first, got in zip(trees, servers, firsts, times, strict=True):
            rss = _ask(server, "rss")
            assert server.stdin is not None
            server.stdin.close()
            server.wait()
            print(
                f"server of {tree}: first recall {first['recall'] * 1000:.0f} ms, "
                f"then first prompt {first['prompt_resource'] * 1000:.0f} ms"
            )
            for call in CALLS:
                ms = sorted(t * 1000 for t in got[call])
                p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
                print(f"  {call:<16} median {statistics.median(ms):7.1f} ms  p99 {p99:7.1f} ms")
            print(f"  RSS now {rss['now']:.0f} MB, peak {rss['peak']:.0f} MB")


def _ask(server: subprocess.Popen[str], what: str) -> dict[str, float]:
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(what + "\n")
    server.stdin.flush()
    answer: dict[str, float] = json.loads(server.stdout.readline())
    return answer


def _add(file: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "memsync", "add", str(file), "--kind", "fact", "--text", "x"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)


def serve(file: Path, tree: Path) -> None:
    """One server of the memsync in `tree`, answering the driver's requests on stdin."""
    sys.path.insert(0, str(tree))
    import anyio
    from mcp import Client

    from memsync.local.statedir import StateDir
    from memsync.mcp_server import start

    server = start(file, "m", StateDir.of())  # as `memsync mcp`: warmed in a thread

    async def timed(what: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        result = await what
        return time.perf_counter() - started, result

    async def drive() -> None:
        async with Client(server) as client:
            for request in sys.stdin:
                answer: dict[str, float] = {}
                if request.strip() == "first":
                    answer["recall"], _ = await timed(client.call_tool("recall", {"query": "x"}))
                    read = client.read_resource("memsync://m/prompt/global")
                    answer["prompt_resource"], _ = await timed(read)
                elif request.strip() == "round":
                    tool = client.call_tool
                    answer["recall"], _ = await timed(tool("recall", {"query": "retry"}))
                    read = client.read_resource("memsync://m/prompt/global")
                    answer["prompt_resource"], _ = await timed(read)
                    new = {"kind": "fact", "text": "bench"}
                    answer["remember"], done = await timed(tool("remember", new))
                    answer["memory_prompt"], _ = await timed(client.get_prompt("memory"))
                    old = done.structured_content["id"]
                    arg = {"id": old, "text": "bench, corrected"}
                    answer["supersede"], done = await timed(tool("supersede", arg))
                    arg = {"id": done.structured_content["id"]}
                    answer["forget"], _ = await timed(tool("forget", arg))
                else:
                    answer["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                    answer["now"] = _rss_now()
                print(json.dumps(answer), flush=True)

    anyio.run(drive)


def _rss_now() -> float:
    """The process's resident set now, in MB (Linux's /proc; else its peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
