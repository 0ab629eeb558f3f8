"""The library driven by a `Config` (read only by the CLI and the daemon, STYLE "config"):
its state directory, each configured remote opened, and one sync pass for every memory and
remote. `memsync.hub` itself takes ready-made objects and never sees the config."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from memsync.config.model import Config, RemoteConfig, default_config_path
from memsync.core.convergence import Convergence
from memsync.errors import KeyFileError
from memsync.hub.codec import Codec, EncryptedCodec, FailingCodec, PlainCodec
from memsync.hub.keys import KEY_FILE_NAME, load_keyring
from memsync.hub.state import resolve_replica
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import Transport, open_transport
from memsync.local.memory import Memory
from memsync.local.statedir import StateDir

__all__ = [
    "ConvergenceRow",
    "codec_for",
    "convergence_of",
    "key_file_of",
    "open_remote",
    "own_key_forms",
    "state_of",
    "sync_config",
]


class ConvergenceRow(NamedTuple):
    """One memory through one remote: its convergence, when the hub was listed, and the
    error that kept it from being read now."""

    memory: str
    remote: str
    convergence: Convergence
    listed_at: int | None
    error: str | None


def state_of(config: Config) -> StateDir:
    """The state directory of `config` (its `state_dir`, a path in the TOML)."""
    return StateDir(config.state_dir)


def open_remote(remote: RemoteConfig) -> Transport:
    """The transport of a configured remote (nothing is connected until it is used)."""
    return open_transport(
        remote.url,
        identity_file=remote.identity_file,
        known_hosts=remote.known_hosts,
        accept_new_host_key=remote.accept_new_host_key,
        timeout=remote.timeout_seconds,
        endpoint_url=remote.endpoint_url,
        region=remote.region,
        profile=remote.profile,
    )


def sync_config(
    config: Config,
    *,
    memory: str | None = None,
    remote: str | None = None,
    transports: dict[str, Transport] | None = None,
    now: int | None = None,
) -> list[SyncReport]:
    """One pass for every memory and remote of `config` (or the one named): a remote that
    fails does not stop the others. `transports`, when given, are reused and kept open
    (the daemon's connections); otherwise they are opened and closed here."""
    state = state_of(config)
    replica = resolve_replica(config.replica, state)
    own = transports is None
    pool: dict[str, Transport] = {} if transports is None else transports
    reports: list[SyncReport] = []
    try:
        for mem in config.memory:
            if memory is not None and mem.name != memory:
                continue
            if not mem.path.exists():
                Memory.open(mem.path)
            for rc in config.memory_remotes(mem):
                if remote is not None and rc.name != remote:
                    continue
                if rc.name not in pool:
                    pool[rc.name] = open_remote(rc)
                reports.append(
                    sync_once(
                        memory=mem.name,
                        local=mem.path,
                        remote=rc.name,
                        transport=pool[rc.name],
                        replica=replica,
                        state_dir=state,
                        now=now,
                        codec=codec_for(rc, config, mem.name),  # issue 12
                    )
                )
    finally:
        if own:
            for t in pool.values():
                t.close()
    return reports


def key_file_of(config: Config | None) -> Path:
    """Where the keys of `config` are: its `key_file` (`load_config` puts it beside the
    config file when the file leaves it out), else, for the embedded default (no config
    file), `keys` in the default config directory (`$MEMSYNC_CONFIG`'s folder,
    `$XDG_CONFIG_HOME/memsync`, or `~/.config/memsync`)."""
    if config is not None and config.key_file is not None:
        return config.key_file
    return default_config_path().parent / KEY_FILE_NAME


def own_key_forms(config: Config | None) -> tuple[str, ...]:
    """This machine's hub keys (the key file of `config`) in every form a person could
    paste (`Keyring.printed_forms`), for `Memory(refused=...)`; empty when there is no
    readable key file (then there is no key to leak)."""
    try:
        return load_keyring(key_file_of(config)).printed_forms()
    except (KeyFileError, OSError):
        return ()


def codec_for(remote: RemoteConfig, config: Config, memory: str) -> Codec:
    """The codec of a memory on a configured remote. Never raises: a remote with
    `encrypt = true` and no usable key file gets a `FailingCodec` saying so."""
    key_file = key_file_of(config)
    if not remote.encrypt:
        return PlainCodec(remote.name, memory, key_file)
    try:
        return EncryptedCodec(remote.name, memory, load_keyring(key_file))
    except KeyFileError as exc:
        return FailingCodec(remote.name, memory, f"encrypt = true for {remote.name}, but {exc}")


def convergence_of(config: Config, now: int, *, live: bool = True) -> list[ConvergenceRow]:
    """The convergence of every memory through every remote of `config` (issue 21): with
    `live`, each hub's folder is listed and its changed receipts read now (a hub that
    cannot be reached is judged as last seen, with the error); else as the last pass saw it.
    """
    from memsync.hub.convergence import convergence
    from memsync.hub.state import retired

    state = state_of(config)
    replica = resolve_replica(config.replica, state)
    gone = retired(state)
    rows: list[ConvergenceRow] = []
    pool: dict[str, Transport] = {}
    try:
        for mem in config.memory:
            for rc in config.memory_remotes(mem):
                if live and rc.name not in pool:
                    pool[rc.name] = open_remote(rc)
                verdict, listed_at, error = convergence(
                    memory=mem.name,
                    remote=rc.name,
                    local=mem.path,
                    replica=replica,
                    state_dir=state,
                    now=now,
                    retired=gone,
                    transport=pool.get(rc.name),
                    codec=codec_for(rc, config, mem.name) if live else None,
                )
                rows.append(ConvergenceRow(mem.name, rc.name, verdict, listed_at, error))
    finally:
        for t in pool.values():
            t.close()
    return rows
