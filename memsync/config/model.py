"""The config's model: strict, frozen pydantic models of the TOML tables, and the defaults.

Validation is strict: `poll_seconds = "30"` is an error, not 30. Paths expand `~` and must
then be absolute (a daemon's working directory is no place to resolve them against).
`config.example.toml` at the repository root documents every key. `memsync.config.load`
reads a file into these models and turns pydantic's report into one `ConfigError`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from memsync.config._messages import KeyedValueError as _KeyedValueError
from memsync.config._messages import describe
from memsync.config.bridges import BridgeConfig
from memsync.core.compaction import (
    DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_POSTPONE_SECONDS,
    DEFAULT_QUIET_SECONDS,
    MAX_HORIZON_DAYS,
    MAX_POSTPONE_SECONDS,
    MAX_WAIT_SECONDS,
)
from memsync.core.names import valid_name, valid_replica, windows_problem
from memsync.errors import shown as _shown
from memsync.hub.transports.url import RemoteURL, parse_remote_url
from memsync.local.dirs import (
    DEFAULT_MEMORY_NAME,
    default_config_path,
    default_memory_path,
    default_state_dir,
)

__all__ = [
    "CompactionConfig",
    "Config",
    "DaemonConfig",
    "MemoryConfig",
    "RemoteConfig",
    "cron_trigger",
    "default_config",
    "default_config_path",
]

_SSH_ONLY = ("identity_file", "known_hosts", "accept_new_host_key")
_S3_ONLY = ("endpoint_url", "region", "profile")
_NETWORK_ONLY = ("timeout_seconds",)
# Keys that apply to some schemes only: (the schemes, the keys).
_SCHEME_KEYS = ((("ssh",), _SSH_ONLY), (("s3",), _S3_ONLY), (("ssh", "s3"), _NETWORK_ONLY))
# Keys that would hold a credential: refused with a hint, never echoed (issue 11).
_SECRET_KEY_RE = re.compile(r"secret|password|passwd|access_key|session_token|credential|token")
# Upper bounds on every number (issue 13, item 17): past them a value is a typo, and some
# (inf, 1e12 seconds) overflow the scheduler at start, a restart loop under systemd.
_DAY = MAX_WAIT_SECONDS


# --- small value checks ---------------------------------------------------------------


def _check_name(value: str) -> str:
    """Return `value` if it is a name the hub can use as a path component, else raise."""
    if not valid_name(value):
        raise ValueError(
            f"invalid name {_shown(value)}: use 1 to 64 of the characters A-Z a-z 0-9 . _ -"
            " (and not '.' or '..')"
        )
    return value


def _expand_path(value: object) -> Path:
    """Given a path string, return it with `~` expanded; raise unless it is then absolute."""
    if not isinstance(value, str | Path):
        # ValueError, not TypeError: pydantic turns only ValueError into a validation error.
        raise ValueError(  # noqa: TRY004
            f"expected a path string, got {describe(value)}"
        )
    text = str(value)
    if not text:
        raise ValueError("empty path")
    path = Path(os.path.expanduser(text))
    if not path.is_absolute():
        raise ValueError(f"{text!r} is not an absolute path; write /... or ~/...")
    return path


def _as_tuple(value: object) -> object:
    """TOML gives arrays as lists; the frozen models hold tuples (strict mode converts none)."""
    return tuple(value) if isinstance(value, list) else value


def _check_portable(value: str) -> str:
    """A name a hub folder read from Windows can hold (issue 23): a memory's folder, a
    replica's file."""
    _check_name(value)
    problem = windows_problem(value)
    if problem is not None:
        raise ValueError(f"invalid name {_shown(value)}: {problem}; a hub may be read from Windows")
    return value


def _check_replica(value: str) -> str:
    """A replica id: a name that does not start with "." (hidden files are no replicas)."""
    _check_portable(value)
    if not valid_replica(value):
        raise ValueError(f"invalid replica id {_shown(value)}: it must not start with '.'")
    return value


_Name = Annotated[str, AfterValidator(_check_name)]
_MemoryName = Annotated[str, AfterValidator(_check_portable)]
_Replica = Annotated[str, AfterValidator(_check_replica)]
_Path = Annotated[Path, BeforeValidator(_expand_path)]


# --- environment defaults -------------------------------------------------------------


def _default_memories() -> tuple[MemoryConfig, ...]:
    return (MemoryConfig(name=DEFAULT_MEMORY_NAME, path=default_memory_path()),)


# --- the models -----------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )


class MemoryConfig(_Model):
    """One `[[memory]]`: a local memory file and the remotes it syncs through."""

    name: _MemoryName
    """Its name in the hub: the folder `<remote>/<name>/` holds one file per replica."""
    path: _Path
    """The local JSON Lines file the agents append to."""
    remotes: Annotated[tuple[_Name, ...], BeforeValidator(_as_tuple)] | None = None
    """Names of `[[remote]]`s to sync through; None (the key left out) means every remote."""

    @field_validator("remotes")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        seen: set[str] = set()
        for index, name in enumerate(value or ()):
            if name in seen:
                raise _KeyedValueError((index,), f"remote {name!r} is listed twice")
            seen.add(name)
        return value


class RemoteConfig(_Model):
    """One `[[remote]]`: a hub directory, in a shared folder or on an SSH host, or a bucket
    prefix in S3-compatible object storage."""

    name: _Name
    """How memories and messages refer to this remote."""
    url: str
    """Where the hub is, as written (see `parsed_url` for the parts)."""
    identity_file: _Path | None = None
    """SSH only: private key to use; else ssh-agent and `~/.ssh/config` decide."""
    known_hosts: _Path | None = None
    """SSH only: known_hosts file to check the host key against; else `~/.ssh/known_hosts`."""
    accept_new_host_key: bool = False
    """SSH only: trust and record an unknown host key on first contact (OpenSSH accept-new);
    a changed key is still refused."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    """SSH and S3: how long to wait for any one answer of the server before the pass fails
    with "no answer" (a host or a network that hangs, no reset coming); setting up the
    connection gets this long too, at most 10 s. An S3 request that timed out is not
    retried (issue 24, item 11)."""
    endpoint_url: str | None = None
    """S3 only: the store's endpoint, e.g. `http://127.0.0.1:8333`; else AWS's."""
    region: str | None = None
    """S3 only: the signing region; else the environment's or profile's."""
    profile: str | None = None
    """S3 only: a profile of `~/.aws/config` and `~/.aws/credentials` for the credentials;
    else boto3's standard chain (environment, default profile, instance role)."""
    poll_seconds: float = Field(default=30.0, gt=0, le=_DAY, allow_inf_nan=False)
    """How often to look for other machines' writes (a folder's inotify never sees them)."""
    # --- issue 12 (hub encryption): one key, see memsync/hub/codec.py ---
    encrypt: bool = False
    """Encrypt what this machine writes to the hub and decrypt what it reads (every machine
    syncing through this remote must agree, and hold the key: `memsync key`)."""

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: object) -> object:
        for key in data if isinstance(data, dict) else ():
            if isinstance(key, str) and _SECRET_KEY_RE.search(key.lower()):
                raise _KeyedValueError(
                    (key,),
                    "no secrets in the config: S3 credentials come from the environment "
                    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), ~/.aws/credentials or a "
                    "profile (profile = ...); SSH uses keys or ssh-agent",
                )
        return data

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        parse_remote_url(value)
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _check_endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if "@" in parts.netloc:  # before any message that could echo it
            raise ValueError("no credentials in endpoint_url")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http:// or https:// url")
        return value

    @model_validator(mode="after")
    def _ssh_only_keys(self) -> RemoteConfig:
        scheme = self.parsed_url.scheme
        kind = {"file": "a folder", "ssh": "an ssh:// remote", "s3": "an s3:// remote"}[scheme]
        for schemes, keys in _SCHEME_KEYS:
            if scheme in schemes:
                continue
            only = " and ".join(f"{x}://" for x in schemes)
            for key in keys:
                if key in self.model_fields_set:
                    raise _KeyedValueError(
                        (key,), f"{key!r} applies to {only} remotes only; this one is {kind}"
                    )
        return self

    @property
    def parsed_url(self) -> RemoteURL:
        """`url` split into scheme, host, user, port and path (already validated)."""
        return parse_remote_url(self.url)


def cron_trigger(schedule: str, timezone: dt.tzinfo | None = dt.UTC) -> Any:
    """The APScheduler 3 trigger of a compaction `schedule`: a crontab line of 5 fields,
    or 6 with seconds first (`*/10 * * * * *`: finer than cron's minute, for tests and
    busy machines). Raises ValueError. apscheduler is imported here: it is heavy, and only
    the daemon and check-config need it."""
    from apscheduler.triggers.cron import CronTrigger

    fields = schedule.split()
    if len(fields) != 6:
        return CronTrigger.from_crontab(schedule, timezone=timezone)
    second, minute, hour, day, month, day_of_week = fields
    return CronTrigger(
        second=second,
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=day_of_week,
        timezone=timezone,
    )


class CompactionConfig(_Model):
    """`[compaction]`: when files are rewritten small (DESIGN "Compaction")."""

    schedule: str = "17 3 * * *"
    """Cron expression, 5 fields, local time. Weekdays by name (mon-fri), not by number."""
    quiet_seconds: float = Field(default=DEFAULT_QUIET_SECONDS, ge=0, le=_DAY, allow_inf_nan=False)
    """Compact a file only after it has not changed for this long."""
    max_postpone_seconds: float = Field(
        default=DEFAULT_MAX_POSTPONE_SECONDS, ge=0, le=MAX_POSTPONE_SECONDS, allow_inf_nan=False
    )
    """The daemon compacts a file postponed for this long (it never got quiet) anyway,
    without the quiet period: the drain of rule 16 keeps what is appended meanwhile."""
    tombstone_horizon_days: int = Field(
        default=round(DEFAULT_HORIZON_DAYS), ge=1, le=MAX_HORIZON_DAYS
    )
    """Keep deletion markers this long, so that no machine brings a deleted entry back."""

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str) -> str:
        example = (
            "write 5 fields 'minute hour day month weekday', e.g. '17 3 * * *' (or 6, "
            "seconds first)"
        )
        try:
            cron_trigger(value)
        except ValueError as exc:
            raise ValueError(f"invalid cron expression {value!r} ({exc}); {example}") from exc
        # APScheduler 3 numbers weekdays from Monday=0, cron from Sunday=0
        # (https://github.com/agronholm/apscheduler/issues/286): names mean the same in both.
        if re.search(r"\d", value.split()[-1]):
            raise ValueError(
                f"cron expression {value!r}: write weekdays by name (sun, mon-fri), not by"
                " number: APScheduler 3 counts them from Monday, cron from Sunday"
            )
        return value


class DaemonConfig(_Model):
    """`[daemon]`: how `memsync daemon` runs."""

    debounce_ms: int = Field(default=200, ge=0, le=60_000)
    """Wait this long after a file change for more changes before syncing."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Least severe log message written to stderr (the journal, under systemd)."""
    reconcile_seconds: float = Field(default=300.0, gt=0, le=_DAY, allow_inf_nan=False)
    """Run a full reconciliation pass this often, catching whatever a watcher missed."""


class Config(_Model):
    """The whole config file. `load_config` reads one; `default_config` is the built-in one."""

    state_dir: _Path = Field(default_factory=default_state_dir)
    """Offsets, replica ids and status: a cache, safe to delete."""
    replica: _Replica | None = None
    """This machine's replica id; None means one made up once and kept in `state_dir`."""
    # --- issue 12 (hub encryption): one key, see memsync/keys.py ---
    key_file: _Path | None = None
    """The hub encryption keys (0600). Left out of a config file: `keys` beside that file
    (`load_config` fills it in); None only for the embedded default: `keys` in the default
    config directory."""
    memory: Annotated[tuple[MemoryConfig, ...], BeforeValidator(_as_tuple)] = Field(
        default_factory=_default_memories, min_length=1
    )
    """The `[[memory]]` tables; left out, one memory named "me" at the default path
    (`memsync.local.dirs.default_memory_path`)."""
    remote: Annotated[tuple[RemoteConfig, ...], BeforeValidator(_as_tuple)] = ()
    """The `[[remote]]` tables; none means memsync only keeps local files tidy."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """The `[compaction]` table."""
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    """The `[daemon]` table."""
    bridge: Annotated[tuple[BridgeConfig, ...], BeforeValidator(_as_tuple)] = ()
    """The `[[bridge]]` tables: files agents read, kept in step with a memory (issue 22)."""

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        _check_unique_names("memory", [m.name for m in self.memory])
        _check_unique("memory", [_real(m.path) for m in self.memory], "path")
        _check_unique_names("remote", [r.name for r in self.remote])
        defined = [r.name for r in self.remote]
        for index, memory in enumerate(self.memory):
            for position, name in enumerate(memory.remotes or ()):
                if name not in defined:
                    close = difflib.get_close_matches(name, defined, n=1)
                    hint = f"did you mean {close[0]!r}?" if close else _listing(defined)
                    raise _KeyedValueError(
                        ("memory", index, "remotes", position),
                        f"no [[remote]] is named {_shown(name)} ({hint})",
                    )
        self._check_hubs_apart_from_memories()
        self._check_bridges()
        return self

    def _check_bridges(self) -> None:
        """Each bridge names a memory of this config, and bridges a file of its own that
        is no memory file."""
        names = [m.name for m in self.memory]
        memories = {_real(m.path) for m in self.memory}
        _check_unique("bridge", [_real(b.path) for b in self.bridge], "path")
        for index, bridge in enumerate(self.bridge):
            if bridge.memory not in names:
                close = difflib.get_close_matches(bridge.memory, names, n=1)
                hint = f"did you mean {close[0]!r}?" if close else _listing(names)
                raise _KeyedValueError(
                    ("bridge", index, "memory"),
                    f"no [[memory]] is named {_shown(bridge.memory)} ({hint})",
                )
            if _real(bridge.path) in memories:
                raise _KeyedValueError(
                    ("bridge", index, "path"),
                    f"{str(bridge.path)!r} is a memory file; bridge a Markdown file",
                )

    def _check_hubs_apart_from_memories(self) -> None:
        """Refuse a folder hub that is a memory file or holds one (issue 13, item 18): the
        hub's own files would be merged into the memory, or the memory read as a peer."""
        for r_index, remote in enumerate(self.remote):
            url = remote.parsed_url
            if url.scheme != "file":
                continue
            hub = _real(Path(url.path))
            for memory in self.memory:
                path = _real(memory.path)
                if path == hub or hub in path.parents:
                    where = "is" if path == hub else "holds"
                    raise _KeyedValueError(
                        ("remote", r_index, "url"),
                        f"the hub {url.path!r} {where} the memory file {str(memory.path)!r}"
                        f" of memory {memory.name!r}; put the hub in a folder of its own",
                    )

    def memory_named(self, name: str) -> MemoryConfig | None:
        """The `[[memory]]` named `name`, or None: the one lookup of a memory by name."""
        return next((m for m in self.memory if m.name == name), None)

    def memory_remotes(self, memory: MemoryConfig | str) -> list[RemoteConfig]:
        """Return the remotes `memory` (a `MemoryConfig` or its name) syncs through.

        In the memory's `remotes` order, or in config order when it names none (every remote).
        Raises KeyError for a memory name not in this config.
        """
        if isinstance(memory, str):
            found = self.memory_named(memory)
            if found is None:
                raise KeyError(memory)
            memory = found
        if memory.remotes is None:
            return list(self.remote)
        by_name = {r.name: r for r in self.remote}
        return [by_name[name] for name in memory.remotes]

    def to_display_dict(self) -> dict[str, Any]:
        """Return the resolved config as JSON-ready data, for `memsync check-config`.

        Paths are expanded, defaults filled in, each memory lists its remotes explicitly, and
        a folder remote's url is shown as its absolute path. The result validates again as a
        `Config` that means the same.
        """
        data: dict[str, Any] = self.model_dump(mode="json")
        for shown, memory in zip(data["memory"], self.memory, strict=True):
            shown["remotes"] = [r.name for r in self.memory_remotes(memory)]
        for shown, remote in zip(data["remote"], self.remote, strict=True):
            parsed = remote.parsed_url
            if parsed.scheme == "file":
                shown["url"] = parsed.path
            for schemes, keys in _SCHEME_KEYS:
                if parsed.scheme not in schemes:
                    for key in keys:
                        del shown[key]
        return data


def _real(path: Path) -> Path:
    """`path` with `..` and symlinks resolved, so that two spellings of one file compare
    equal; a path that does not exist yet is resolved as far as it goes."""
    return Path(os.path.realpath(path))


def _check_unique(table: str, values: list[Any], key: str) -> None:
    first_seen: dict[Any, int] = {}
    for index, value in enumerate(values):
        if value in first_seen:
            raise _KeyedValueError(
                (table, index, key),
                f"{str(value)!r} is already used by {table}[{first_seen[value]}]; {key}s must"
                " be unique",
            )
        first_seen[value] = index


def _check_unique_names(table: str, names: list[str]) -> None:
    """Names unique even casefolded (issue 23, item 2): `Me` and `me` are one state file
    and one hub folder on a case-insensitive file system (macOS, SMB, exFAT)."""
    _check_unique(table, names, "name")
    first_seen: dict[str, int] = {}
    for index, name in enumerate(names):
        folded = name.casefold()
        if folded in first_seen:
            other = names[first_seen[folded]]
            raise _KeyedValueError(
                (table, index, "name"),
                f"{name!r} differs from {other!r} ({table}[{first_seen[folded]}]) only in "
                "case: one file on a case-insensitive file system (macOS, SMB, exFAT); "
                "names must differ in more than case",
            )
        first_seen[folded] = index


def _listing(names: list[str]) -> str:
    return "defined: " + ", ".join(repr(n) for n in names) if names else "none is defined"


def default_config() -> Config:
    """Return the config the daemon uses when no config file exists.

    One memory named "me" at `~/.local/share/agent-memory/me.jsonl` (or at the former
    default `memory.jsonl` there when only that file exists: issue 24, item 17), no remotes, and
    the default `[compaction]` and `[daemon]` settings.
    """
    return Config()
