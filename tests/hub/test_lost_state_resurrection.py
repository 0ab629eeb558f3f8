"""Issue 24, residual (b): the resurrection window after a lost state directory.

`a` writes X, `b` forgets it; everyone reads everything; past the horizon both compact as
the daemon does (`compact_memory`: the local file and the own hub file). The tombstone is
acknowledged, so it leaves `b`'s files and `a`'s local file; `a`'s own hub file held X,
and its compaction kept it (the tombstone was in `b`'s hub file, not `a`'s). Then `a`
loses its state directory: its next pass reads its own hub file from the start and X came
back to life on `a`, and on any new replica. Now a compaction of our own hub file weighs
it against the local file's records the hub holds, before the local file drops them: X
leaves `a`'s hub file while `a`'s local file still holds the tombstone.

The local file keeps an acknowledged tombstone until our hub file was compacted against
it since the tombstone was seen (`memsync compact` alone, or a hub out of reach, no longer
drops it first); and every replica keeps it until each peer's own hub file was compacted
so (the peers' "weighed" watermarks). Left open: a peer that never compacted its hub file
(no daemon, or an older memsync) still counts by how far it has read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.config.wiring import open_remote
from memsync.core.timestamps import SECOND, format_ts
from memsync.hub.compaction import compact_memory
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.sync import MEMORY, Replica, hub_file, make_replica

DAY = 86_400 * SECOND


def _compact_as_the_daemon_does(replica: Replica, now: int) -> None:
    config = load_config(replica.config)
    [mem] = config.memory
    remotes = config.memory_remotes(mem)
    done = compact_memory(
        mem.path,
        memory=MEMORY,
        remotes=[rc.name for rc in remotes],
        replica=replica.replica_id,
        state_dir=StateDir(replica.state_dir),
        transports={rc.name: open_remote(rc) for rc in remotes},
        now=now,
        horizon_days=1,
        quiet_seconds=0,
    )
    assert done.hub_errors == {}


@pytest.mark.slow
@pytest.mark.parametrize("cli_first", [False, True], ids=["daemon", "memsync-compact-first"])
def test_a_lost_state_directory_brings_no_forgotten_entry_back(
    tmp_path: Path, hub: Path, cli_first: bool
) -> None:
    """`memsync-compact-first`: the local file compacted alone first (the command line has
    no hub connection): it keeps the tombstone until our hub file is weighed, so that the
    daemon's compaction still finds it there."""
    a = make_replica(tmp_path, "a", str(hub), replica_id="a")
    b = make_replica(tmp_path, "b", str(hub), replica_id="b")
    x = a.memory().add("fact", "Doomed: the staging bucket is public.").id
    kept = a.memory().add("fact", "Kept: the build needs Python 3.11.").id
    for r in (a, b):
        r.sync()
    b.memory().forget(x)
    for r in (b, a, b, a):  # the tombstone read by everyone, and said so
        r.sync()

    later = now_us() + 2 * DAY  # past the horizon
    if cli_first:
        at = format_ts(later)
        for r in (a, b):
            done = r.cli(
                "compact", str(r.path), "--quiet-seconds", "0", "--horizon-days", "1", "--now", at
            )
            assert done.rc == 0, done.out + done.err
        assert x.encode() in a.path.read_bytes()  # the tombstone stays
    _compact_as_the_daemon_does(b, later)
    _compact_as_the_daemon_does(a, later)
    assert x.encode() not in a.path.read_bytes()  # acknowledged: the tombstone went
    assert x.encode() not in hub_file(hub, "b").read_bytes()
    assert x.encode() not in hub_file(hub, "a").read_bytes()  # and X with it

    a.forget_state()
    a.sync()
    assert {e.id for e in a.view().entries} == {kept}
    c = make_replica(tmp_path, "c", str(hub), replica_id="c")
    c.sync()
    assert {e.id for e in c.view().entries} == {kept}


@pytest.mark.slow
def test_a_peer_keeps_the_tombstone_until_the_entrys_writer_has_weighed_its_hub_file(
    tmp_path: Path, hub: Path
) -> None:
    """The window between machines: `b` forgets `a`'s entry X; everyone reads the
    tombstone; past the horizon `b` compacts first. Dropped then from `b`'s files, the
    tombstone left X in `a`'s hub file with nothing to delete it, for a new machine to
    read. `a` publishes how far it had read when it last compacted its hub file against
    its local file ("weighed"); `b` keeps the tombstone until that covers it."""
    a = make_replica(tmp_path, "a", str(hub), replica_id="a")
    b = make_replica(tmp_path, "b", str(hub), replica_id="b")
    x = a.memory().add("fact", "Doomed: the staging bucket is public.").id
    kept = a.memory().add("fact", "Kept: the build needs Python 3.11.").id
    for r in (a, b):
        r.sync()
    _compact_as_the_daemon_does(a, now_us())  # a has weighed once: it says "weighed"
    b.memory().forget(x)
    for r in (a, b, a, b, a):  # the tombstone read by everyone, and said so
        r.sync()

    later = now_us() + 2 * DAY  # past the horizon
    _compact_as_the_daemon_does(b, later)
    assert x.encode() in hub_file(hub, "b").read_bytes()  # kept: a has not weighed since
    c = make_replica(tmp_path, "c", str(hub), replica_id="c")
    c.sync()
    assert {e.id for e in c.view().entries} == {kept}

    _compact_as_the_daemon_does(a, later)  # X leaves a's hub file
    assert x.encode() not in hub_file(hub, "a").read_bytes()
    for r in (a, b):
        r.sync()
    _compact_as_the_daemon_does(b, later)
    assert x.encode() not in hub_file(hub, "b").read_bytes()  # now it may go
    d = make_replica(tmp_path, "d", str(hub), replica_id="d")
    d.sync()
    assert {e.id for e in d.view().entries} == {kept}
