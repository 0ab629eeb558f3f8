"""Two real daemons syncing through an encrypted folder hub (issue 12): the daemon passes
each remote's codec to sync and to hub compaction, and reads the key file (default place:
`keys` beside the config file `--config` names, issue 24, item 15) at every pass."""

from __future__ import annotations

import json
from dataclasses import dataclass

from memsync.hub.keys import Keyring, new_master_key
from tests.helpers.daemons import MEMORY, Cluster, Remote, cli_add, start_all, view_ids, wait_for


@dataclass
class EncryptedRemote(Remote):
    def toml(self) -> str:
        return super().toml() + "encrypt = true\n"


def test_two_daemons_sync_through_an_encrypted_folder_hub(cluster: Cluster) -> None:
    hub = cluster.hub()
    key = new_master_key()
    a = cluster.node("a", [EncryptedRemote("hub", str(hub))])
    b = cluster.node("b", [EncryptedRemote("hub", str(hub))])
    for node in (a, b):
        Keyring(node.config.parent / "keys", (key,)).save()
    start_all(a, b)
    on_a = cli_add(a.memory, "the deploy token lives in the team vault")
    wait_for(lambda: on_a in view_ids(b.memory), "A's add in B's view")
    on_b = cli_add(b.memory, "prefer tables over prose")
    wait_for(lambda: on_b in view_ids(a.memory), "B's add in A's view")
    blobs = b"".join(p.read_bytes() for p in hub.rglob("*") if p.is_file())
    for needle in (on_a, on_b, "team vault", "tables over prose"):
        assert needle.encode() not in blobs
    for node in (a, b):
        header = json.loads(node.hub_file(hub).read_bytes().split(b"\n", 1)[0])
        assert header["encryption"] == "aes-siv-256/1"
    assert (hub / MEMORY).is_dir()
    assert a.stop() == 0
    assert b.stop() == 0
