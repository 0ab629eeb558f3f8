"""Matching a watcher's event to a configured path (issue 23, item 3).

macOS's FSEvents reports canonical paths: `/private/var/...` for a file configured under
`/var/...` (a symbolic link), the case and the Unicode form (NFD on HFS+) the file system
stores. A configured path spelled otherwise must still match, or a local write waits for
the reconcile pass (300 s). Here: a folder reached through a symbolic link, another case,
an NFD name, a hard link (same device and inode), and the daemon's own dispatch."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from memsync.config import load_config
from memsync.daemon._watch import canonical, same_path
from memsync.daemon.service import Daemon


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    """`private/var/me.jsonl`, and `var` a symbolic link to `private/var` (as on macOS)."""
    real = tmp_path / "private" / "var"
    real.mkdir(parents=True)
    (tmp_path / "var").symlink_to(real)
    (real / "me.jsonl").write_bytes(b"")
    return tmp_path / "var" / "me.jsonl", real / "me.jsonl"


def test_a_canonical_event_matches_a_path_through_a_symlink(tmp_path: Path) -> None:
    configured, reported = _layout(tmp_path)
    assert configured != reported
    assert same_path(reported, configured)
    assert same_path(reported.parent, configured.parent)


def test_another_case_and_another_unicode_form_match(tmp_path: Path) -> None:
    name = "café.jsonl"
    configured = tmp_path / unicodedata.normalize("NFC", name)
    configured.write_bytes(b"")
    nfd = tmp_path / unicodedata.normalize("NFD", name)
    assert str(nfd) != str(configured)
    assert same_path(nfd, configured)  # HFS+ reports names decomposed
    assert same_path(tmp_path / "CAFÉ.jsonl", configured)  # APFS: another case
    assert canonical(nfd) == canonical(configured)


def test_the_same_inode_under_another_name_matches(tmp_path: Path) -> None:
    configured = tmp_path / "me.jsonl"
    configured.write_bytes(b"")
    os.link(configured, tmp_path / "alias.jsonl")
    assert same_path(tmp_path / "alias.jsonl", configured)


def test_other_files_do_not_match(tmp_path: Path) -> None:
    configured, reported = _layout(tmp_path)
    (reported.parent / "other.jsonl").write_bytes(b"")
    assert not same_path(reported.parent / "other.jsonl", configured)
    assert not same_path(tmp_path / "gone.jsonl", configured)
    assert not same_path(reported.parent, configured)


def test_the_daemon_wakes_for_an_event_spelled_canonically(tmp_path: Path) -> None:
    configured, reported = _layout(tmp_path)
    hub = tmp_path / "hub"
    (hub / "me").mkdir(parents=True, mode=0o700)
    (tmp_path / "hub-link").symlink_to(hub)
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'replica = "laptop"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[[memory]]\nname = "me"\npath = "{configured}"\n'
        f'[[remote]]\nname = "nas"\nurl = "{tmp_path / "hub-link"}"\n',
        encoding="utf-8",
    )
    daemon = Daemon(load_config(config_path), config_path)
    daemon._on_changes({reported})
    assert daemon._requests.take() == {("me", "")}
    asked: list[str] = []
    daemon.request = lambda memory, remote: asked.append(f"{memory}/{remote}")  # type: ignore[method-assign]
    daemon._on_changes({hub / "me" / "desktop.jsonl"})  # a peer's push, canonically spelled
    assert asked == ["me/nas"]
