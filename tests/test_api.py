"""The public API without traps (issue 19, item 6): what a library user reaches from
`import memsync` alone behaves as the command line does.

- compaction keeps every tombstone past the horizon unless told which ones every replica
  has read (SEMANTICS rule 15): `memsync.ALL` for a file no hub shares, the hub's word
  (`memsync.acknowledged_for`) for a synced one;
- the in-memory transport is exported, as httpx exports its mock transport;
- `open_transport` takes a remote's url as the config writes it;
- the whole error tree is exported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memsync
from memsync import (
    ALL,
    HubKeyMismatch,
    InMemoryTransport,
    KeyFileError,
    Memory,
    MemsyncError,
    StateDir,
    TransportError,
    UnreadableHubFile,
    acknowledged_for,
    compact_file,
    merge_files,
    open_transport,
    sync_once,
)
from memsync.cli import main
from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.timestamps import SECOND, format_ts

DAY = 86_400 * SECOND
LATER = 100 * DAY
"""Past the default 90-day horizon."""


def _tombstoned(path: Path) -> tuple[Memory, str]:
    """A memory file with one entry forgotten: its tombstone, and a version it deleted."""
    mem = Memory.open(path)
    rid = mem.add("fact", "The build server is build-01.").id
    mem.forget(rid)
    return mem, rid


def _tombstones(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if '"deleted":true' in line]


def _last_ts(path: Path) -> int:
    """The instant of the file's last record."""
    return max(r.ts for r in map(classify, path.read_bytes().splitlines()) if type(r) is Record)


def test_library_compaction_keeps_old_tombstones_unless_told_all(tmp_path: Path) -> None:
    mem, rid = _tombstoned(tmp_path / "me.jsonl")
    now = _last_ts(mem.path) + LATER
    kept = mem.compact(now=now, quiet_seconds=0, grace_seconds=0)
    assert "old tombstone" not in kept.dropped
    assert len(_tombstones(mem.path)) == 1
    also_kept = compact_file(mem.path, now=now, quiet_seconds=0, grace_seconds=0)
    assert "old tombstone" not in also_kept.dropped
    assert len(_tombstones(mem.path)) == 1
    gone = mem.compact(now=now, quiet_seconds=0, grace_seconds=0, acknowledged=ALL)
    assert gone.dropped["old tombstone"] == 1
    assert _tombstones(mem.path) == []
    assert rid not in mem.path.read_text()
    assert repr(ALL) == "memsync.ALL"


def test_the_cli_still_lets_old_tombstones_of_an_unshared_file_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memsync compact` on a file no config names: no replica can hold a tombstone back,
    so every one past the horizon goes (the CLI says `ALL` for it)."""
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "no-config.toml"))
    mem, _ = _tombstoned(tmp_path / "me.jsonl")
    now = format_ts(_last_ts(mem.path) + LATER)
    assert main(["compact", str(mem.path), "--quiet-seconds", "0", "--now", now]) == 0
    assert _tombstones(mem.path) == []


def _sync(mem: Memory, hub: InMemoryTransport, name: str, state: Path) -> None:
    report = sync_once(
        memory="me", local=mem.path, remote="hub", transport=hub, replica=name, state_dir=state
    )
    assert report.ok, report.error


def test_a_synced_file_compacted_from_the_library_brings_nothing_back(tmp_path: Path) -> None:
    """The trap of issue 19: `a` forgets an entry `b` holds and has not yet read the
    tombstone of; `a` compacts from the library, long past the horizon. Its tombstone must
    stay, or `b`'s copy of the entry comes back to `a` at the next merge (rule 15)."""
    hub = InMemoryTransport()
    a = Memory.open(tmp_path / "a" / "me.jsonl")
    b = Memory.open(tmp_path / "b" / "me.jsonl")
    rid = a.add("fact", "The build server is build-01.").id
    _sync(a, hub, "a", tmp_path / "a-state")
    _sync(b, hub, "b", tmp_path / "b-state")
    assert [e.id for e in b.view().entries] == [rid]
    a.forget(rid)
    _sync(a, hub, "a", tmp_path / "a-state")
    now = _last_ts(a.path) + LATER
    a.compact(now=now, quiet_seconds=0, grace_seconds=0)  # the default: nobody said
    # The hub's word, as `memsync compact` reads it: b has not read the tombstone.
    ack = acknowledged_for(StateDir(tmp_path / "a-state"), "me", ["hub"], "a")
    assert ack is not None
    a.compact(now=now, quiet_seconds=0, grace_seconds=0, acknowledged=ack)
    assert len(_tombstones(a.path)) == 1
    # b's copy of the entry, merged into a (a git merge, a `memsync merge`): still deleted.
    merge_files(a.path, [b.path])
    assert rid not in [e.id for e in a.view().entries]


def test_open_transport_takes_a_url_as_the_config_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of the tester's
    assert repr(open_transport(str(tmp_path))) == f"LocalDirTransport({str(tmp_path)!r})"
    assert repr(open_transport(f"file://{tmp_path}")) == f"LocalDirTransport({str(tmp_path)!r})"
    home = open_transport("~/hub")
    assert repr(home) == f"LocalDirTransport({str(tmp_path / 'hub')!r})"
    ssh = open_transport("ssh://me@vm:2222/srv/memsync", timeout=5)
    assert repr(ssh) == "SSHTransport('ssh://me@vm:2222/srv/memsync')"
    s3 = open_transport("s3://bucket/hub", endpoint_url="http://127.0.0.1:1")
    assert repr(s3) == "S3Transport('s3://bucket/hub')"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("relative/hub", "not an absolute path"),
        ("ssh:///srv/memsync", "no host"),
        ("ftp://vm/srv/hub", "unsupported url scheme 'ftp'"),
        ("ssh://me:hunter2@vm/srv/hub", "no passwords"),
    ],
)
def test_open_transport_refuses_a_bad_url_in_one_line(url: str, said: str) -> None:
    with pytest.raises(TransportError) as info:
        open_transport(url)
    message = str(info.value)
    assert said in message
    assert "\n" not in message
    assert "hunter2" not in message


def test_every_error_of_the_tree_is_exported() -> None:
    tree = {
        name
        for name, value in vars(memsync.errors).items()
        if isinstance(value, type) and issubclass(value, MemsyncError)
    }
    assert tree <= set(memsync.__all__)
    for error in (KeyFileError, HubKeyMismatch, UnreadableHubFile):
        assert issubclass(error, MemsyncError)


def test_import_memsync_leaves_typing_extensions_to_whoever_needs_it() -> None:
    """Issue 20 (start-up): `import memsync` loads msgspec without `typing_extensions` (and
    so without `inspect`), and then takes nothing from anyone: typing_extensions imports
    as usual afterwards, pydantic's models (which need it) validate, and msgspec decodes
    memsync's Structs with their annotations resolved."""
    code = (
        "import sys, memsync\n"
        "assert 'msgspec' in sys.modules, 'msgspec not imported'\n"
        "assert 'typing_extensions' not in sys.modules, 'typing_extensions imported'\n"
        "assert 'inspect' not in sys.modules, 'inspect imported'\n"
        "import typing_extensions\n"
        "from memsync.models import Entry\n"
        "from datetime import datetime, timezone\n"
        "at = datetime(2026, 1, 1, tzinfo=timezone.utc)\n"
        "e = Entry(id='a', kind='fact', text='x', created_at=at)\n"
        "from memsync.core.lines import classify\n"
        'print(e.id, type(classify(b\'{"id": "a", "kind": "fact", "text": "x", '
        '"created_at": "2026-01-01T00:00:00Z"}\')).__name__)\n'
    )
    assert _fresh_python(code) == ["a", "Record"]


def test_import_memsync_from_a_second_thread_leaves_typing_extensions_alone() -> None:
    """With other threads running, `import memsync` does not hide typing_extensions even
    for a moment: one of them could be importing it. msgspec then imports it as usual."""
    code = (
        "import sys, threading\n"
        "stop = threading.Event()\n"
        "t = threading.Thread(target=stop.wait)\n"
        "t.start()\n"
        "import memsync, msgspec\n"
        "stop.set()\n"
        "t.join()\n"
        "print('typing_extensions' in sys.modules)\n"
    )
    assert _fresh_python(code) == ["True"]


def _fresh_python(code: str) -> list[str]:
    """The words `code` prints, run by a fresh interpreter (which must succeed)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()
