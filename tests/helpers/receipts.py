"""Helpers for the receipt tests (issue 21): a replica's receipt as another machine reads it."""

from __future__ import annotations

from pathlib import Path

from memsync.config import load_config
from memsync.config.wiring import codec_for
from memsync.core.receipts import RECEIPT_SUFFIX, Receipt
from memsync.hub.receipts import read_receipt
from memsync.hub.transports import RemoteFile
from memsync.hub.transports.localdir import LocalDirTransport
from tests.helpers.sync import MEMORY, Replica

__all__ = ["receipt_path", "receipt_read_by"]


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
