"""test_hubcompact.py's scenarios (tombstones held back until every replica has read them,
the resurrection they prevent, compaction of our own hub file noticed by peers) over an
encrypted hub (issue 12): the same test functions, with replicas made encrypted and hub
compaction given the remote's codec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsync.config import load_config
from memsync.config.wiring import codec_for
from memsync.hub.compaction import compact_own_hub_file
from memsync.hub.keys import new_master_key
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.crypto import encrypted_replica, readable_in_hub
from tests.helpers.sync import MEMORY, Replica, assert_converged, hub_file
from tests.hub import test_hubcompact as plain

KEY = new_master_key()

test_a_tombstone_every_replica_read_is_acknowledged_and_may_go = (
    plain.test_a_tombstone_every_replica_read_is_acknowledged_and_may_go
)
test_a_replica_that_has_not_read_a_tombstone_holds_it_back = (
    plain.test_a_replica_that_has_not_read_a_tombstone_holds_it_back
)
test_a_retired_replica_no_longer_holds_tombstones_back = (
    plain.test_a_retired_replica_no_longer_holds_tombstones_back
)
test_own_hub_file_compaction_is_noticed_by_peers = (
    plain.test_own_hub_file_compaction_is_noticed_by_peers
)


def _compact_with_codec(**kw: Any) -> tuple[int, int] | None:
    config = load_config(kw["state_dir"].root.parent / "config.toml")
    codec = codec_for(config.remote[0], config, kw["memory"])
    return compact_own_hub_file(**kw, codec=codec)


@pytest.fixture(autouse=True)
def _encrypted(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(tmp: Path, name: str, url: str) -> Replica:
        return encrypted_replica(tmp, name, url, KEY)

    monkeypatch.setattr(plain, "make_replica", make)
    monkeypatch.setattr(plain, "compact_own_hub_file", _compact_with_codec)


def test_own_hub_file_compacted_stays_encrypted(tmp_path: Path) -> None:
    hub, (a, b), _rid = plain._deleted_entry(tmp_path, ["a", "b"])
    mem = a.memory()
    for i in range(10):
        mem.supersede(mem.add("lesson", f"Version {i}.").id, f"Version {i}, revised.")
    for r in (a, b, a):
        r.sync()
    sizes = _compact_with_codec(
        memory=MEMORY,
        remote="hub",
        transport=LocalDirTransport(hub),
        replica="a",
        state_dir=StateDir(a.state_dir),
        horizon=plain.DAY,
        acknowledged=None,
        now=now_us() + 2 * plain.DAY,
    )
    assert sizes is not None
    assert sizes[1] < sizes[0]
    lines = hub_file(hub, a).read_bytes().splitlines()
    assert json.loads(lines[0])["encryption"] == "aes-siv-256/1"
    assert all(line.startswith(b'{"c":"') for line in lines[1:])
    assert readable_in_hub(hub, [a, b]) == []
    a.memory().add("fact", "After the compaction.")
    for r in (b, a, b):
        r.sync()
    assert_converged([a, b])
