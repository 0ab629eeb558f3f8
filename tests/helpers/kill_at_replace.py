"""`python -m tests.helpers.kill_at_replace CONFIG`: a real process that compacts every
memory of CONFIG and its own file in each hub as the daemon's scheduled compaction does
(`compact_memory` with the configured transports and codecs), and is killed with SIGKILL
right after the replace of its own hub file lands, before it saves its state (issue 24,
"the wedge"). Exits 0 only when there was nothing to replace (the caller asserts -9)."""

from __future__ import annotations

import sys
from pathlib import Path

from memsync.config import load_config
from memsync.config.wiring import codec_for, open_remote, state_of
from memsync.hub.compaction import compact_memory
from memsync.hub.state import resolve_replica
from memsync.hub.transports import Transport
from tests.helpers.faults import KilledAfterReplace


def main(config_path: str) -> int:
    config = load_config(Path(config_path))
    state = state_of(config)
    replica = resolve_replica(config.replica, state)
    for mem in config.memory:
        remotes = config.memory_remotes(mem)
        transports: dict[str, Transport] = {
            rc.name: KilledAfterReplace(open_remote(rc), replica + ".jsonl") for rc in remotes
        }
        done = compact_memory(
            mem.path,
            memory=mem.name,
            remotes=[rc.name for rc in remotes],
            replica=replica,
            state_dir=state,
            transports=transports,
            codecs={rc.name: codec_for(rc, config, mem.name) for rc in remotes},
            horizon_days=config.compaction.tombstone_horizon_days,
            quiet_seconds=0,
            force=True,
        )
        for name, error in done.hub_errors.items():
            print(f"{mem.name} in {name}: {error}", file=sys.stderr)
        for name, sizes in done.hub_files.items():
            if sizes is None:
                print(f"{mem.name} in {name}: own hub file not as state says", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
