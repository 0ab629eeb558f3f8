"""Convergence receipts in a hub (issue 21, step 1): what a pass publishes, and when."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from memsync.cli import main
from memsync.core.timestamps import SECOND
from memsync.hub.receipts import RECEIPT_EVERY
from memsync.local.fresh import now_us
from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory, readable_in_hub
from tests.helpers.receipts import receipt_path, receipt_read_by
from tests.helpers.sync import Replica, hub_file


def _show_digest(replica: Replica) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", "--digest", str(replica.path)]) == 0
    return out.getvalue().strip()


@BOTH_CODECS
def test_each_pass_that_changes_something_publishes_what_the_replica_holds(
    tmp_path: Path, hub: Path, new_replica: ReplicaFactory, codec: str
) -> None:
    a, b = (new_replica(tmp_path, name, str(hub)) for name in "ab")
    a.memory().add("fact", "The staging bucket is eu-west-1.")
    b.memory().add("preference", "Answers in short sentences.")
    for r in (a, b, a):
        r.sync()
    for reader in (a, b):
        for of in (a, b):
            receipt = receipt_read_by(reader, hub, of)
            assert receipt is not None
            assert receipt.replica == of.replica_id
            digest, entries = _show_digest(of).split(" ", 1)
            assert f"{receipt.view.digest:016x}" == digest
            assert f"{receipt.view.entries} entries" == entries == "2 entries"
            assert sum(receipt.view.buckets) % (1 << 64) == receipt.view.digest
            assert receipt.unpushed == 0
    ra, rb = receipt_read_by(b, hub, a), receipt_read_by(a, hub, b)
    assert ra is not None
    assert rb is not None
    size_a, size_b = hub_file(hub, a).stat().st_size, hub_file(hub, b).stat().st_size
    assert ra.own is not None
    assert ra.own[0] == size_a
    assert rb.own is not None
    assert rb.own[0] == size_b
    assert ra.read["b.jsonl"][0] == size_b  # a read all of b's file
    assert rb.read["a.jsonl"][0] == size_a  # a's second pass pushed nothing new
    assert ra.prompt == rb.prompt  # one prompt block on both
    if codec == "encrypted":  # no id and no text anywhere in the hub, receipts included
        assert readable_in_hub(hub, [a, b]) == []


def test_an_encrypted_receipt_is_sealed_and_a_plain_reader_gets_none(
    tmp_path: Path, hub: Path
) -> None:
    from tests.helpers.crypto import replica_factory

    make = replica_factory("encrypted")
    a = make(tmp_path, "a", str(hub))
    a.memory().add("fact", "Deploys happen on Tuesdays only.")
    a.sync()
    raw = receipt_path(hub, a).read_bytes()
    assert b"Tuesdays" not in raw
    assert b'"view"' not in raw
    assert b"buckets" not in raw
    assert readable_in_hub(hub, [a]) == []
    plain = replica_factory("plain")(tmp_path, "p", str(hub))
    assert receipt_read_by(plain, hub, a) is None  # sealed: a plain reader reads nothing
    assert receipt_read_by(a, hub, a) is not None


def test_a_quiet_pass_publishes_only_after_the_bound(tmp_path: Path, hub: Path) -> None:
    from tests.helpers.sync import make_replica

    a = make_replica(tmp_path, "a", str(hub))
    a.memory().add("fact", "The build needs Python 3.11.")
    start = now_us()
    a.sync_config(now=start)
    first = receipt_path(hub, a).read_bytes()
    a.sync_config(now=start + 10 * SECOND)  # nothing changed: no new receipt
    assert receipt_path(hub, a).read_bytes() == first
    a.sync_config(now=start + RECEIPT_EVERY + SECOND)  # alive: the time moves on
    again = receipt_read_by(a, hub, a)
    assert again is not None
    assert again.time == start + RECEIPT_EVERY + SECOND
    a.memory().add("fact", "Tests are flaky on Mondays.")
    a.sync_config(now=start + RECEIPT_EVERY + 2 * SECOND)  # a push: published at once
    pushed = receipt_read_by(a, hub, a)
    assert pushed is not None
    assert pushed.view.entries == 2


def test_the_prompt_digest_names_the_block_agents_are_shown(tmp_path: Path, hub: Path) -> None:
    from memsync.core.receipts import prompt_digest
    from memsync.hub.receipts import PROMPT_CHARS
    from memsync.local.livecache import live_cache
    from memsync.mcp_server import DEFAULT_MAX_CHARS
    from tests.helpers.sync import make_replica

    assert PROMPT_CHARS == DEFAULT_MAX_CHARS
    a = make_replica(tmp_path, "a", str(hub))
    for i in range(300):  # more than the block holds: the bound matters
        a.memory().add("fact", f"Fact number {i} about the build, long enough to count.")
    a.sync()
    receipt = receipt_read_by(a, hub, a)
    assert receipt is not None
    block = live_cache(a.path).prompt(None, DEFAULT_MAX_CHARS, markdown=True)
    assert receipt.prompt == prompt_digest(block)


def test_a_quiet_receipt_is_folded_again_once_an_entry_has_expired(
    tmp_path: Path, hub: Path
) -> None:
    """A quiet machine's periodic receipt reuses its last view, but not past an
    `expires_at` in it (rule 11): the view has changed without a new record."""
    from memsync.core.timestamps import format_ts
    from tests.helpers.sync import entry_line, make_replica

    start = now_us()
    a = make_replica(tmp_path, "a", str(hub))
    a.memory().add("fact", "Forever.")
    with a.path.open("ab") as f:
        line = entry_line(
            "0000expires", start, "Until noon.", expires_at=format_ts(start + 3600 * SECOND)
        )
        f.write(line + b"\n")
    a.sync_config(now=start)
    first = receipt_read_by(a, hub, a)
    assert first is not None
    assert first.view.entries == 2
    assert first.view.valid_until == start + 3600 * SECOND
    a.sync_config(now=start + RECEIPT_EVERY + SECOND)  # quiet, before the expiry
    again = receipt_read_by(a, hub, a)
    assert again is not None
    assert (again.view.digest, again.view.entries) == (first.view.digest, 2)
    assert again.time == start + RECEIPT_EVERY + SECOND
    a.sync_config(now=start + 2 * 3600 * SECOND)  # quiet, past it
    late = receipt_read_by(a, hub, a)
    assert late is not None
    assert late.view.entries == 1
    assert late.view.valid_until is None
