"""The application's configuration: TOML in, frozen pydantic objects out.

Only the CLI, the daemon and the MCP server read a config; the library takes ready-made
objects (STYLE). `model` holds the tables and their defaults, `load` reads a file with one
`ConfigError` per mistake, and `wiring` turns a config into transports, codecs and sync
passes. Importing this package imports pydantic: the everyday commands never do.
"""

from __future__ import annotations

from memsync.config.load import load_config
from memsync.config.model import (
    CompactionConfig,
    Config,
    DaemonConfig,
    MemoryConfig,
    RemoteConfig,
    cron_trigger,
    default_config,
    default_config_path,
)
from memsync.hub.transports.url import RemoteURL, parse_remote_url
from memsync.local.dirs import default_state_dir

__all__ = [
    "CompactionConfig",
    "Config",
    "DaemonConfig",
    "MemoryConfig",
    "RemoteConfig",
    "RemoteURL",
    "cron_trigger",
    "default_config",
    "default_config_path",
    "default_state_dir",
    "load_config",
    "parse_remote_url",
]
