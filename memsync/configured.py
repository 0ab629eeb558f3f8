"""The library driven by a `Config` (read only by the CLI and the daemon, STYLE "config"):
open each configured remote, and one sync pass for every memory and remote. `memsync.hub`
itself takes ready-made objects and never sees the config."""

from __future__ import annotations

from memsync.config import Config, RemoteConfig
from memsync.hub.state import resolve_replica
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import Transport, open_transport
from memsync.local.memory import Memory

__all__ = ["open_remote", "sync_config"]


def open_remote(remote: RemoteConfig) -> Transport:
    """The transport of a configured remote (nothing is connected until it is used)."""
    url = remote.parsed_url
    return open_transport(
        url.scheme,
        url.path,
        host=url.host,
        user=url.user,
        port=url.port,
        identity_file=remote.identity_file,
        known_hosts=remote.known_hosts,
        accept_new_host_key=remote.accept_new_host_key,
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
    replica = resolve_replica(config.replica, config.state_dir)
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
                        state_dir=config.state_dir,
                        now=now,
                    )
                )
    finally:
        if own:
            for t in pool.values():
                t.close()
    return reports
