"""The quick part built on two cores (`memsync.local.viewranks_halves`, issue 20): byte for
byte what one process builds, wherever the ids are cut."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from memsync.local import forking
from memsync.local.located import located_view
from memsync.local.statedir import StateDir
from memsync.local.viewranks_halves import build_in_halves
from memsync.local.viewranks_write import _Slot, build
from memsync.local.viewstore import ViewStore, _unpack
from tests.helpers.strategies import HEADER, NOW
from tests.helpers.view_lines import MINUTE, entries

LATER = (NOW, NOW + 2 * MINUTE, NOW + 9 * MINUTE)


def _tables(tmp_path: Path, seed: int) -> tuple[tuple[_Slot, _Slot, _Slot], dict[str, int]]:
    """The tables and supersession bits of a stored view of 400 generated entries."""
    path = tmp_path / "me.jsonl"
    path.write_bytes(HEADER + b"\n" + b"".join(line + b"\n" for line in entries(seed, 400)))
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=0)
    located_view([path], NOW, store).close()
    stored = _unpack(store.state.view_store(path).read_bytes())
    assert stored is not None
    superseded = dict(zip(stored.sup_ids, stored.sup_bits, strict=True))
    return (stored.tombs, stored.user, stored.inferred), superseded


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_processes_build_what_one_builds(tmp_path: Path, seed: int) -> None:
    tables, superseded = _tables(tmp_path, seed)
    for floor in LATER:
        one = build(*tables, superseded, floor)
        assert one[0]  # (entries live: scopes to number)
        # Cut before the first id, after the last, and between: the child's part empty,
        # this process's empty, both holding scopes first met on either side.
        for share in (0.0, 0.1, 0.4, 0.5, 0.9, 1.0):
            assert build_in_halves(*tables, superseded, floor, parallel_from=0, share=share) == one


def test_a_fork_that_fails_builds_it_all_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process or memory to spare: the quick part is built in this process, the same."""
    tables, superseded = _tables(tmp_path, 4)
    one = build(*tables, superseded, NOW)
    # Forking allowed (a test process has other threads), then refused by the system.
    monkeypatch.setattr(forking, "threading", SimpleNamespace(active_count=lambda: 1))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    tried: list[int] = []

    def no_fork() -> int:
        tried.append(1)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    met: list[int] = []
    assert (
        build_in_halves(*tables, superseded, NOW, parallel_from=0, meanwhile=lambda: met.append(1))
        == one
    )
    assert tried == [1]
    assert met == [1]  # what was to run meanwhile ran once
