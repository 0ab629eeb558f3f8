"""Case-insensitive hubs and state (issue 23, item 2).

On APFS, an SMB share or an exFAT stick, `Laptop.jsonl` and `laptop.jsonl` are one file:
two machines whose replica ids differ only in case would write one hub file, one adopting
the other's records. The hub, a folder or in memory, is seen through `CaseFolding` (a
case-folding, case-preserving wrapper of a transport); the second machine's pass is
refused with one line, and the first machine's file is left as it was. Memory and remote names
that differ only in case are refused by the configuration (one state file, one folder).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.errors import ConfigError
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.hub.transports.memory import InMemoryTransport
from memsync.local.memory import Memory
from tests.helpers.casefold import CaseFolding
from tests.helpers.records import T0

NOW = T0 + 10**6


def _sync(hub: CaseFolding, local: Path, replica: str, state: Path) -> SyncReport:
    return sync_once(
        memory="notes",
        local=local,
        remote="hub",
        transport=hub,
        replica=replica,
        state_dir=state,
        now=NOW,
    )


def test_the_wrapper_folds_case_as_such_a_file_system_does(tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir(mode=0o700)
    hub = CaseFolding(LocalDirTransport(tmp_path / "hub"))
    hub.write_at("notes", "laptop.jsonl", 0, b"a\n")
    assert hub.size("Notes", "LAPTOP.jsonl") == 2
    hub.write_at("NOTES", "Laptop.jsonl", 2, b"b\n")
    assert [f.name for f in hub.list_files("notes")] == ["laptop.jsonl"]
    assert (tmp_path / "hub" / "notes" / "laptop.jsonl").read_bytes() == b"a\nb\n"


def test_the_wrapper_folds_case_over_the_in_memory_hub_too() -> None:
    memory = InMemoryTransport()
    hub = CaseFolding(memory)
    hub.write_at("notes", "laptop.jsonl", 0, b"a\n")
    assert hub.size("Notes", "LAPTOP.jsonl") == 2
    hub.write_at("NOTES", "Laptop.jsonl", 2, b"b\n")
    hub.replace("Notes", "LAPTOP.jsonl", b"c\n")
    assert [f.name for f in hub.list_files("NoTeS")] == ["laptop.jsonl"]
    assert memory.files == {("notes", "laptop.jsonl"): bytearray(b"c\n")}


@pytest.fixture(params=["folder", "memory"])
def case_hub(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[CaseFolding, Callable[[], bytes]]:
    """A case-folding hub over the folder or the in-memory transport, and the bytes of
    its file `notes/laptop.jsonl` (read past the wrapper)."""
    if request.param == "folder":
        (tmp_path / "hub").mkdir(mode=0o700)
        hub_file = tmp_path / "hub" / "notes" / "laptop.jsonl"
        return CaseFolding(LocalDirTransport(tmp_path / "hub")), hub_file.read_bytes
    memory = InMemoryTransport()
    return CaseFolding(memory), lambda: bytes(memory.files[("notes", "laptop.jsonl")])


def test_a_replica_differing_from_ours_only_in_case_is_refused(
    tmp_path: Path, case_hub: tuple[CaseFolding, Callable[[], bytes]]
) -> None:
    hub, hub_file_bytes = case_hub
    first, second = tmp_path / "a" / "me.jsonl", tmp_path / "b" / "me.jsonl"
    first.parent.mkdir()
    second.parent.mkdir()
    Memory.open(first, now=NOW).add("fact", "From the laptop.", now=NOW)
    Memory.open(second, now=NOW).add("fact", "From the other Laptop.", now=NOW)
    report = _sync(hub, first, "laptop", tmp_path / "state-a")
    assert report.ok, report.error
    before, mine = hub_file_bytes(), second.read_bytes()

    report = _sync(hub, second, "Laptop", tmp_path / "state-b")
    error = report.error
    assert error is not None
    assert "replica 'laptop' differs from this machine's id 'Laptop' only in case" in error
    assert "\n" not in error
    assert hub_file_bytes() == before  # the laptop's file is not written into
    assert second.read_bytes() == mine  # nor adopted as the other's own
    texts = {e.text for e in Memory(first).view(NOW).entries}
    assert texts == {"From the laptop."}
    # and the first machine goes on syncing
    assert _sync(hub, first, "laptop", tmp_path / "state-a").ok


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            '[[memory]]\nname = "me"\npath = "/a"\n[[memory]]\nname = "Me"\npath = "/b"\n',
            "memory[1].name",
        ),
        (
            (
                '[[memory]]\nname = "me"\npath = "/a"\n[[remote]]\nname = "nas"\n'
                'url = "/h1"\n[[remote]]\nname = "NAS"\nurl = "/h2"\n'
            ),
            "remote[1].name",
        ),
    ],
)
def test_names_differing_only_in_case_are_refused(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key
    assert "only in case" in info.value.message
    assert "\n" not in str(info.value)
