"""`memsync key new | show | import | rotate` (issue 12) through `cli.main`: exit codes,
one-line errors, the key only on stdout of `show`, the key file 0600, nothing written
outside the config directory."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from memsync.cli import main
from memsync.hub.crypto import key_id, parse_key
from memsync.hub.keys import load_keyring


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cfg"
    monkeypatch.setenv("MEMSYNC_CONFIG", str(folder / "config.toml"))  # no such file
    return folder


def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setattr("sys.stdin", io.StringIO(stdin))
        rc = main(["key", *args])
    return rc, out.getvalue(), err.getvalue()


def test_new_show_import_rotate(config_dir: Path) -> None:
    rc, out, _ = run("new")
    assert rc == 0
    ring = load_keyring(config_dir / "keys")
    assert ring.ids[0] in out
    assert (config_dir / "keys").stat().st_mode & 0o777 == 0o600
    rc, out, err = run("show")
    assert rc == 0
    assert parse_key(out) == ring.current
    assert "SECRET" in err
    assert out.strip() not in err
    rc, _, err = run("new")
    assert rc == 2
    assert err.startswith("memsync: ")
    assert "memsync key rotate" in err
    rc, out, _ = run("rotate")
    assert rc == 0
    rotated = load_keyring(config_dir / "keys")
    assert rotated.keys[1] == ring.current
    assert rotated.ids[0] in out
    rc, out, _ = run("show", "--all")
    assert [parse_key(line) for line in out.split()] == list(rotated.keys)


def test_import_from_stdin_and_arguments(config_dir: Path, tmp_path: Path) -> None:
    run("new")
    source = load_keyring(config_dir / "keys")
    _, shown, _ = run("show")
    (config_dir / "keys").unlink()
    rc, out, _ = run("import", stdin=shown)
    assert rc == 0
    assert key_id(source.current) in out
    assert load_keyring(config_dir / "keys").keys == source.keys
    run("rotate")
    _, both, _ = run("show", "--all")
    (config_dir / "keys").unlink()
    rc, _, _ = run("import", *both.split())
    assert rc == 0
    assert load_keyring(config_dir / "keys").keys == tuple(parse_key(t) for t in both.split())


def test_bad_keys_are_one_line_errors_that_do_not_echo(config_dir: Path) -> None:
    rc, _, err = run("import", "msk1-not-a-key")
    assert rc == 2
    assert err.count("\n") == 1
    assert "not-a-key" not in err
    rc, _, err = run("import")
    assert rc == 2
    assert "no key given" in err
    rc, _, err = run("show")
    assert rc == 2
    assert "no key file" in err
    assert not (config_dir / "keys").exists()


def test_key_new_with_config_puts_the_keys_beside_that_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, item 15: `--config a/config.toml` wrote ~/.config/memsync/keys, where
    MEMSYNC_CONFIG=a/config.toml wrote a/keys: two configs on one machine silently shared
    one key file. One rule now, for the key commands and for the passes that use the keys."""
    from memsync.config import load_config
    from memsync.config.wiring import key_file_of

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.toml").write_text(
            f'[[memory]]\nname = "me"\npath = "{tmp_path / name / "me.jsonl"}"\n'
        )
    assert run("new", "--config", "a/config.toml")[0] == 0
    assert run("new", "--config", str(tmp_path / "b" / "config.toml"))[0] == 0
    a, b = load_keyring(tmp_path / "a" / "keys"), load_keyring(tmp_path / "b" / "keys")
    assert a.current != b.current
    assert not (home / ".config" / "memsync" / "keys").exists()
    rc, out, _ = run("show", "--config", "a/config.toml")
    assert (rc, parse_key(out)) == (0, a.current)
    assert key_file_of(load_config("a/config.toml")) == tmp_path / "a" / "keys"
    # The same file through MEMSYNC_CONFIG: one rule for both ways of naming a config.
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "b" / "config.toml"))
    rc, out, _ = run("show")
    assert (rc, parse_key(out)) == (0, b.current)
