"""Issue 24, item 19: a steady-state pull reads a peer's file from where it stopped, on
folder and SSH hubs, never again from the start (dedup would hide such a re-read from
every other test: only the bytes read tell). Counted through a wrapping transport."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.config.wiring import open_remote
from memsync.hub._pass import _HEAD_BYTES, HUB_TAIL_BYTES
from tests.helpers.faults import CountingReads
from tests.helpers.sshd import SshdServer
from tests.helpers.sync import make_replica, ssh_remote, write_records


@pytest.fixture(params=["folder", pytest.param("ssh", marks=pytest.mark.integration)])
def hub_url(request: pytest.FixtureRequest, hub: Path) -> dict[str, object]:
    if request.param == "folder":
        return {"hub_url": str(hub)}
    server: SshdServer = request.getfixturevalue("sshd_server")
    return ssh_remote(server, hub)


def test_a_steady_state_pull_reads_only_what_the_peer_appended(
    tmp_path: Path, hub_url: dict[str, object]
) -> None:
    a = make_replica(tmp_path, "a", **hub_url)  # type: ignore[arg-type]
    b = make_replica(tmp_path, "b", **hub_url)  # type: ignore[arg-type]
    write_records(a.path, 300)
    a.sync()
    b.sync()  # b has read a's file once, whole
    config = load_config(b.config)
    [rc] = config.memory_remotes(config.memory[0])
    counting = CountingReads(open_remote(rc))
    try:
        # Nothing new: not a byte of a's file is read.
        [report] = b.sync_config(transports={"hub": counting})
        assert report.ok, report.error
        assert counting.bytes_read("a.jsonl") == 0

        a.memory().add("fact", "One more, after b read everything.")
        [report] = a.sync_config()
        assert report.ok, report.error
        new_bytes = report.pushed_bytes
        counting.reads.clear()
        [report] = b.sync_config(transports={"hub": counting})
        assert report.ok, report.error
        assert report.pulled_records == 1
        # The new line, the bytes checked before it, and the header's generation token.
        budget = new_bytes + HUB_TAIL_BYTES + _HEAD_BYTES
        assert counting.bytes_read("a.jsonl") <= budget, counting.reads
    finally:
        counting.close()
