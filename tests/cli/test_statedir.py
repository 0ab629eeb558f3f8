"""The command line keeps the config's `state_dir` (`memsync.cli._statedir`): read as the
daemon reads it (`load_config`), without pydantic, and used by every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.cli._statedir import configured_state_dir
from memsync.config import load_config
from memsync.local.dirs import STATE_DIR_VARIABLE, default_state_dir
from memsync.local.statedir import StateDir

MEMORY = '\n[[memory]]\nname = "me"\npath = "{memory}"\n'

READ_AS_THE_DAEMON_READS = [
    'state_dir = "{dir}"\n',
    "state_dir='{dir}'   # a literal string, a comment\n",
    '"state_dir" = "{dir}"\r\n',
    '  state_dir\t=\t"{dir}"\n',
    'replica = "laptop"\nstate_dir = "{escaped}"\n',  # an escape: tomllib reads it
    'replica = """laptop"""\nstate_dir = "{dir}"\n',  # a multi-line string first: tomllib
    'state_dir = "~/{home}"\n',
]


@pytest.mark.parametrize("text", READ_AS_THE_DAEMON_READS)
def test_the_state_dir_is_read_as_the_daemon_reads_it(tmp_path: Path, text: str) -> None:
    home = tmp_path / "home"
    wanted = home / "st ate" / "memsync"
    config = tmp_path / "config.toml"
    body = text.format(
        dir=wanted, escaped=str(wanted).replace("/", "\\u002F"), home=wanted.relative_to(home)
    )
    config.write_text(body + MEMORY.format(memory=tmp_path / "me.jsonl"), encoding="utf-8")
    env = {**os.environ, "HOME": str(home)}
    code = (
        "import sys; from pathlib import Path\n"
        "from memsync.cli._statedir import configured_state_dir\n"
        "from memsync.config import load_config\n"
        "p = Path(sys.argv[1]); print(configured_state_dir(p)); print(load_config(p).state_dir)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(config)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [str(wanted), str(wanted)]


@pytest.mark.parametrize(
    "text",
    [
        "",  # no key: the default
        '[[memory]]\nname = "x"\npath = "/m.jsonl"\nstate_dir = "/in/a/table"\n',
        '# state_dir = "/a/comment"\n',
        'state_dir = "relative/path"\n',  # refused by the daemon; the commands keep the default
        "state_dir = 3\n",
        'state_dir = "/a\\qb"\n',  # not TOML (an unknown escape)
    ],
)
def test_no_usable_state_dir_leaves_the_default(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    assert configured_state_dir(config) is None
    assert configured_state_dir(tmp_path / "missing.toml") is None


def test_the_environment_names_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STATE_DIR_VARIABLE, str(tmp_path / "named"))
    assert default_state_dir() == tmp_path / "named"
    assert StateDir.of().root == tmp_path / "named"
    monkeypatch.setenv(STATE_DIR_VARIABLE, "relative")  # ignored, as XDG's are
    assert default_state_dir() != Path("relative")


@pytest.mark.slow
def test_the_commands_keep_their_views_in_the_configs_state_dir(tmp_path: Path) -> None:
    """`prompt`, `recall` and `merge` keep the persistent view, the full-text index and the
    merge index where the daemon keeps its state, not in `$XDG_STATE_HOME`."""
    elsewhere, xdg = tmp_path / "elsewhere", tmp_path / "xdg"
    memory, other = tmp_path / "me.jsonl", tmp_path / "other.jsonl"
    header = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}\n'
    lines = [
        b'{"id": "e%05d", "kind": "fact", "text": "entry %d about builds", '
        b'"created_at": "2026-11-02T00:00:%02dZ"}\n' % (i, i, i % 60)
        for i in range(4000)
    ]
    memory.write_bytes(header + b"".join(lines))  # over the store's 256 KiB
    other.write_bytes(header + lines[0])
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{elsewhere}"\n' + MEMORY.format(memory=memory))
    env = {**os.environ, "MEMSYNC_CONFIG": str(config), "XDG_STATE_HOME": str(xdg)}
    env.pop(STATE_DIR_VARIABLE, None)
    for args in (
        ["prompt", str(memory), "--max-chars", "2000"],
        ["recall", str(memory), "builds"],
        ["merge", str(other), "--into", str(memory)],
    ):
        subprocess.run(
            [sys.executable, "-m", "memsync", *args], env=env, check=True, capture_output=True
        )
    state = StateDir(elsewhere)
    assert state.view_store(memory).exists()
    assert state.recall_index(memory).exists()
    assert load_config(config).state_dir == elsewhere  # the daemon's
    assert not (xdg / "memsync").exists()
