"""Two `memsync daemon` processes syncing through an S3 hub on a real SeaweedFS
(`tests/s3server.py`), with the credentials in each daemon's environment (issue 11)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.hub.transports.s3 import S3Transport
from tests.helpers.daemons import (
    MEMORY,
    Cluster,
    Remote,
    cli_add,
    duplicates,
    memsync,
    start_all,
    view_ids,
    wait_for,
)
from tests.helpers.s3server import S3Server

pytestmark = pytest.mark.integration


@dataclass
class S3Remote(Remote):
    """A `[[remote]]` table for an s3:// hub."""

    endpoint_url: str = ""

    def toml(self) -> str:
        extra = f'endpoint_url = {json.dumps(self.endpoint_url)}\nregion = "us-east-1"\n'
        return super().toml() + extra


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "nodes")
    c.root.mkdir()
    try:
        yield c
    finally:
        c.close()


def test_two_daemons_sync_through_an_s3_hub(s3_server: S3Server, cluster: Cluster) -> None:
    bucket = s3_server.new_bucket()
    env = {
        **s3_server.env,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    remote = S3Remote("team", f"s3://{bucket}/hub", endpoint_url=s3_server.endpoint)
    a = cluster.node("a", [remote], env=env)
    b = cluster.node("b", [remote], env=env)
    start_all(a, b)

    on_a = cli_add(a.memory, "learned on A")
    wait_for(lambda: on_a in view_ids(b.memory), "A's add in B's view (through S3)")
    on_b = cli_add(b.memory, "learned on B")
    wait_for(lambda: on_b in view_ids(a.memory), "B's add in A's view (through S3)")

    t = S3Transport(bucket, "hub", client=s3_server.client())
    for name in ("a.jsonl", "b.jsonl"):
        size = t.size(MEMORY, name)
        assert size, f"nothing pushed to {name}"
        lines = [raw for raw in t.read(MEMORY, name, 0, size).split(b"\n") if raw.startswith(b"{")]
        assert not duplicates(lines)
    for node in (a, b):
        assert node.stop() == 0
        st = node.status()
        assert st is not None
        assert st.memories[MEMORY].remotes["team"].last_error is None
        assert st.memories[MEMORY].remotes["team"].write_mode == "conditional"
    shown = memsync("status", "--config", str(a.config))
    assert "S3 writes: conditional" in shown.stdout, shown.stdout
