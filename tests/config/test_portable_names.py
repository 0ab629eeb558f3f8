"""Memory names and replica ids a hub folder read from Windows can hold (issue 23):
refused in the configuration with one line naming the key; remote names, which name no
hub path, are not concerned."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.errors import ConfigError


def _error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.file == str(path)
    assert "\n" not in str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('replica = "con"\n[[memory]]\nname = "me"\npath = "/m"\n', "replica"),
        ('replica = "LPT1.jsonl"\n[[memory]]\nname = "me"\npath = "/m"\n', "replica"),
        ('replica = "laptop."\n[[memory]]\nname = "me"\npath = "/m"\n', "replica"),
        ('[[memory]]\nname = "nul"\npath = "/m"\n', "memory[0].name"),
        ('[[memory]]\nname = "Aux.notes"\npath = "/m"\n', "memory[0].name"),
        ('[[memory]]\nname = "notes."\npath = "/m"\n', "memory[0].name"),
    ],
)
def test_names_windows_cannot_hold_are_refused(tmp_path: Path, text: str, key: str) -> None:
    error = _error(tmp_path, text)
    assert error.key == key
    assert "a hub may be read from Windows" in error.message


def test_portable_names_and_remote_names_load(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'replica = "console"\n[[memory]]\nname = "notes"\npath = "/m"\n'
        '[[remote]]\nname = "con"\nurl = "/hub"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.replica == "console"
    assert [m.name for m in config.memory] == ["notes"]
