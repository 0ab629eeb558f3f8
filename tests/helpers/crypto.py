"""Helpers for the hub encryption tests (issue 12): replicas with `encrypt = true` and a
key file of their own, and checks that a hub holds nothing readable."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memsync.config import load_config
from memsync.config.wiring import codec_for
from memsync.hub.compaction import compact_own_hub_file
from memsync.hub.keys import Keyring, new_master_key
from tests.helpers.sync import Replica, make_replica, record_lines

__all__ = [
    "BOTH_CODECS",
    "SHARED_KEY",
    "ReplicaFactory",
    "compact_own_hub_file_as_configured",
    "encrypted_replica",
    "hub_digest",
    "hub_plain_lines",
    "readable_in_hub",
    "replica_factory",
    "set_encrypt",
]


def encrypted_replica(
    tmp: Path, name: str, hub_url: str | None = None, key: bytes | None = None, **opts: Any
) -> Replica:
    """`make_replica` with `encrypt = true` on its hub remote and `key_file` set to
    `<tmp>/<name>/keys`, holding `key` (None: no key file)."""
    replica = make_replica(tmp, name, hub_url, encrypt=True, **opts)
    key_file = replica.root / "keys"
    text = replica.config.read_text(encoding="utf-8")
    replica.config.write_text(f"key_file = {json.dumps(str(key_file))}\n{text}", encoding="utf-8")
    if key is not None:
        Keyring(key_file, (key,)).save()
    return replica


ReplicaFactory = Callable[..., Replica]
"""`make_replica`'s signature: `(tmp, name, hub_url=None, **opts) -> Replica`."""

SHARED_KEY = new_master_key()
"""The hub key of every encrypted replica made by `replica_factory("encrypted")`."""

BOTH_CODECS = pytest.mark.parametrize("codec", ["plain", "encrypted"], indirect=True)
"""Run a test whose replicas come from the `new_replica` fixture over a plain hub and an
encrypted one (the `codec` fixture in conftest.py)."""


def replica_factory(codec: str) -> ReplicaFactory:
    """`make_replica` for "plain", `encrypted_replica` under `SHARED_KEY` for "encrypted"."""
    if codec == "encrypted":
        return partial(encrypted_replica, key=SHARED_KEY)
    if codec == "plain":
        return make_replica
    raise ValueError(f"unknown codec {codec!r}")


def compact_own_hub_file_as_configured(**kw: Any) -> tuple[int, int] | None:
    """`compact_own_hub_file(**kw)` with the codec the replica's config gives its remote
    (the one the daemon passes): plain or encrypted alike."""
    config = load_config(kw["state_dir"].root.parent / "config.toml")
    codec = codec_for(config.remote[0], config, kw["memory"])
    return compact_own_hub_file(**kw, codec=codec)


def set_encrypt(replica: Replica, on: bool) -> None:
    """Turn `encrypt` on or off for the replica's hub remote (a key_file line is added when
    missing)."""
    text = replica.config.read_text(encoding="utf-8")
    text = text.replace("encrypt = true\n", "").replace("encrypt = false\n", "")
    if "key_file = " not in text:
        text = f"key_file = {json.dumps(str(replica.root / 'keys'))}\n{text}"
    flag = "encrypt = true\n" if on else "encrypt = false\n"
    text = text.replace('name = "hub"\n', 'name = "hub"\n' + flag)
    replica.config.write_text(text, encoding="utf-8")


def hub_digest(hub: Path) -> dict[str, str]:
    """The SHA-256 of every file under the hub (sidecars and watermarks included)."""
    return {
        str(p.relative_to(hub)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(hub.rglob("*"))
        if p.is_file()
    }


def readable_in_hub(hub: Path, replicas: list[Replica]) -> list[str]:
    """Every id and text of the replicas' local records that appears anywhere in the hub's
    bytes (`grep -rF` of each): empty for an encrypted hub."""
    needles: set[bytes] = set()
    for r in replicas:
        for raw in record_lines(r.path):
            obj = json.loads(raw)
            needles.add(obj["id"].encode())
            if isinstance(obj.get("text"), str):
                needles.add(obj["text"].encode())
                needles.add(json.dumps(obj["text"])[1:-1].encode())
    blobs = [p.read_bytes() for p in hub.rglob("*") if p.is_file()]
    return sorted(n.decode() for n in needles if any(n in blob for blob in blobs))


def hub_plain_lines(path: Path, key: bytes, memory: str = "notes") -> tuple[list[bytes], int]:
    """The plain lines of an encrypted hub file's complete lines (the header left out),
    and how many lines did not decrypt (a torn line, terminated)."""
    from memsync.hub.crypto import LineCipher

    cipher = LineCipher(key, memory)
    data = path.read_bytes()
    plain: list[bytes] = []
    failed = 0
    for raw in data[: data.rfind(b"\n") + 1].split(b"\n")[1:-1]:
        line = cipher.decrypt(raw)
        if line is None:
            failed += 1
        else:
            plain.append(line)
    return plain, failed
