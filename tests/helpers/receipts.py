"""Helpers for the receipt tests (issue 21): a replica's receipt as another machine reads
it, replicas on any hub (folder, SSH, S3; plain or encrypted), what `status` says of each,
and a receipt forged as a faulty replica would publish it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsync.config import load_config
from memsync.config.wiring import codec_for, open_remote
from memsync.core.receipts import RECEIPT_SUFFIX, Receipt, parse_receipt
from memsync.hub.keys import Keyring
from memsync.hub.receipts import read_receipt, seal, unseal
from memsync.hub.transports import RemoteFile
from memsync.hub.transports.localdir import LocalDirTransport
from tests.helpers.crypto import SHARED_KEY
from tests.helpers.s3server import S3Server
from tests.helpers.sshd import SshdServer
from tests.helpers.sync import MEMORY, Replica, make_replica, ssh_remote

__all__ = [
    "forge_digest",
    "receipt_path",
    "receipt_read_by",
    "replica_on",
    "standings",
    "status_json",
]


def receipt_path(hub: Path, replica: Replica) -> Path:
    """Where `replica`'s receipt is in a folder hub."""
    return hub / MEMORY / f"{replica.replica_id}{RECEIPT_SUFFIX}"


def receipt_read_by(reader: Replica, hub: Path, of: Replica) -> Receipt | None:
    """`of`'s receipt in the folder hub, as `reader` reads it (with its codec and keys)."""
    config = load_config(reader.config)
    codec = codec_for(config.remote[0], config, MEMORY)
    path = receipt_path(hub, of)
    st = path.stat()
    f = RemoteFile(path.name, st.st_size, st.st_mtime)
    return read_receipt(LocalDirTransport(hub), codec, MEMORY, f)


def replica_on(
    kind: str,
    tmp: Path,
    name: str,
    *,
    hub: Path,
    encrypted: bool,
    sshd: SshdServer | None = None,
    s3: tuple[S3Server, str] | None = None,
) -> Replica:
    """A replica whose remote "hub" is the folder `hub` ("folder"), the same folder over
    `sshd` ("ssh"), or a bucket of `s3` ("s3"); encrypted under `SHARED_KEY` or not."""
    table: dict[str, Any]
    if kind == "folder":
        table = {"url": str(hub)}
    elif kind == "ssh":
        assert sshd is not None
        opts = ssh_remote(sshd, hub)
        table = {"url": opts.pop("hub_url"), **opts}
    else:
        assert s3 is not None
        server, bucket = s3
        table = {
            "url": f"s3://{bucket}/hub",
            "endpoint_url": server.endpoint,
            "region": "us-east-1",
        }
    if encrypted:
        table["encrypt"] = True
    replica = make_replica(tmp, name, remotes={"hub": table})
    if encrypted:
        key_file = replica.root / "keys"
        text = replica.config.read_text(encoding="utf-8")
        replica.config.write_text(f"key_file = {json.dumps(str(key_file))}\n{text}", "utf-8")
        Keyring(key_file, (SHARED_KEY,)).save()
    return replica


def status_json(replica: Replica) -> dict[str, Any]:
    """`memsync status --json` of a replica (its exit status is 1 without a daemon)."""
    doc: dict[str, Any] = json.loads(replica.cli("status", "--json").out)
    return doc


def standings(replica: Replica) -> dict[str, str]:
    """What `memsync status --json` on `replica` says of every replica: id -> state."""
    (row,) = status_json(replica)["convergence"]
    assert row["error"] is None, row["error"]
    return {r["replica"]: r["state"] for r in row["replicas"]}


def forge_digest(of: Replica) -> None:
    """Rewrite `of`'s receipt in the hub with another view digest, sealed as `of` seals
    it: what a replica with a faulty view (a bug, another version) would publish."""
    config = load_config(of.config)
    codec = codec_for(config.remote[0], config, MEMORY)
    t = open_remote(config.remote[0])
    try:
        name = of.replica_id + RECEIPT_SUFFIX
        (f,) = [f for f in t.list_files(MEMORY) if f.name == name]
        plain = unseal(codec, MEMORY, t.read(MEMORY, name, 0, f.size))
        assert plain is not None
        receipt = parse_receipt(of.replica_id, plain)
        assert receipt is not None
        # One entry counted wrong in bucket 0: the digest is the sum of the buckets'.
        receipt.view.buckets[0] = (receipt.view.buckets[0] + 1) % (1 << 64)
        receipt.view.digest = (receipt.view.digest + 1) % (1 << 64)
        t.replace(MEMORY, name, seal(codec, MEMORY, of.replica_id, receipt.encode()))
    finally:
        t.close()
