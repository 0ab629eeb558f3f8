"""Read a config file into the model, turning every mistake into one `ConfigError`.

Every mistake becomes one `ConfigError(file, key, message)` whose key is dotted like the TOML
(`remote[1].poll_seconds`) and whose message is one line with a hint:

    >>> load_config(Path("config.toml"))  # doctest: +SKIP
    memsync.errors.ConfigError: config.toml: remote[0].poll_second: unknown key
    'poll_second' (did you mean 'poll_seconds'?)
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ValidationError

from memsync.config._messages import config_error
from memsync.config.bridges import BridgeConfig
from memsync.config.model import CompactionConfig, Config, DaemonConfig, MemoryConfig, RemoteConfig
from memsync.errors import ConfigError
from memsync.hub.keys import KEY_FILE_NAME

__all__ = ["load_config"]


def load_config(path: Path | str) -> Config:
    """Read and validate a config file.

    Args:
        path: the TOML file, e.g. `default_config_path()`.

    Returns:
        The validated, frozen `Config`, with `~` expanded in every path, and `key_file`,
        when the file leaves it out, `keys` beside the file: one rule whether the config
        is named by `--config`, `$MEMSYNC_CONFIG` or the default path (issue 24, item 15).

    Raises:
        ConfigError: the file is missing or unreadable, is not valid UTF-8 TOML, or breaks a
            rule; `.key` is the dotted key (`remote[1].poll_seconds`, empty for a file-level
            problem) and `.message` one line with a hint. Only the first mistake is reported.
    """
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(
            file, "", "no such file (copy config.example.toml there to start one)"
        ) from exc
    except IsADirectoryError as exc:
        raise ConfigError(file, "", "is a directory, not a config file") from exc
    except OSError as exc:
        raise ConfigError(file, "", f"cannot read it: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            file, "", f"not UTF-8 text (byte {exc.start}); TOML files must be UTF-8"
        ) from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "", f"TOML syntax error: {exc}") from exc
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        # from None: pydantic's multi-line report is what this message replaces.
        raise config_error(file, exc, _known_keys) from None
    if config.key_file is None:
        beside = Path(os.path.abspath(path)).parent / KEY_FILE_NAME
        config = config.model_copy(update={"key_file": beside})
    return config


def _known_keys(table_loc: tuple[str | int, ...]) -> list[str]:
    tables: dict[tuple[str, ...], type[BaseModel]] = {
        (): Config,
        ("memory",): MemoryConfig,
        ("remote",): RemoteConfig,
        ("compaction",): CompactionConfig,
        ("daemon",): DaemonConfig,
        ("bridge",): BridgeConfig,
    }
    model = tables.get(tuple(str(part) for part in table_loc if isinstance(part, str)))
    return sorted(model.model_fields) if model is not None else []
