"""`memsync show --digest` (issue 20): the same on replicas that exchanged everything
through a hub, different while one record is held by one replica only."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from memsync.cli import main
from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory
from tests.helpers.sync import Replica, converge


def _digest(replica: Replica) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", "--digest", str(replica.path)]) == 0
    return out.getvalue().strip()


@pytest.mark.slow
@BOTH_CODECS
def test_replicas_that_exchanged_everything_print_one_digest(
    tmp_path: Path, hub: Path, new_replica: ReplicaFactory
) -> None:
    replicas = [new_replica(tmp_path, name, str(hub)) for name in "abc"]
    converge(replicas, hub, seed=31, rounds=3)
    digests = {_digest(r) for r in replicas}
    assert len(digests) == 1
    (agreed,) = digests
    entries = len(replicas[0].view())
    assert agreed.endswith(f" {entries} entries")

    replicas[1].memory().add("fact", "Only on b until it syncs.")
    assert _digest(replicas[1]) != agreed
    assert _digest(replicas[0]) == _digest(replicas[2]) == agreed

    for r in (replicas[1], replicas[0], replicas[2]):
        r.sync()
    assert len({_digest(r) for r in replicas}) == 1
    assert _digest(replicas[0]) != agreed
