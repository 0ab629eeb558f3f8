"""`memsync.local.bridges`: syncing a bridged Markdown file with a memory (issue 22, items
2 to 4), on real files: the block goes in and comes back, a person's edits become records,
everything outside the block stays byte for byte, links, modes and other writers are kept."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.core.bridge_block import BEGIN, END, Selection, locate
from memsync.errors import MemsyncError
from memsync.local.bridge_files import read_bridged, replace_if_unchanged
from memsync.local.bridges import Bridge, remove_block, sync_bridge
from memsync.local.importers import vendor_records
from memsync.local.memory import Memory
from tests.helpers.examples import examples
from tests.helpers.vendor_files import AGENTS_MD, GEMINI_MD

# The sample AGENTS.md of the docs, without the hand-made memsync block the importer's
# tests put at its end (a marker of another shape: refused, see below).
AGENTS = AGENTS_MD.split("\n<!-- memsync: begin")[0]
T0 = "2026-01-01T00:00:00Z"
PERSON = "# Project\n\nRun `make lint` before committing.\n\n## Style\n- Tabs, not spaces.\n"


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory.open(tmp_path / "me.jsonl")
    m.add("preference", "Use uv, not pip.", source="user")
    m.add("avoid", "Never force-push main.")
    m.add("fact", "Staging needs the VPN.", scope="project:x")
    return m


def _sync(mem: Memory, path: Path, fmt: str = "agents-md", **kw: Any) -> Any:
    bridge = Bridge(path, fmt, Selection(scope="project:x"))
    return sync_bridge(mem.path, bridge, machine="m1", state_dir=path.parent / "state", **kw)


def _outside(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    span = locate(text)
    assert span is not None
    return text[: span.start] + text[span.stop :]


def _block(path: Path) -> list[str]:
    span = locate(path.read_text(encoding="utf-8"))
    assert span is not None
    return list(span.inner)


def _texts(mem: Memory) -> list[str]:
    return sorted(e.text for e in mem.view().entries)


def test_the_block_goes_in_at_the_top_and_the_rest_stays_byte_for_byte(
    mem: Memory, tmp_path: Path
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(AGENTS, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.written
    assert res.refused is None
    text = agents.read_text(encoding="utf-8")
    assert text.startswith(BEGIN + "\n")
    assert _outside(agents) == AGENTS
    assert _block(agents) == [
        "- Preference (said by the person): Use uv, not pip.",
        "- Avoid: Never force-push main.",
        "- Fact: \\[project:x\\] Staging needs the VPN.",
    ]
    again = _sync(mem, agents)
    assert not again.written
    assert again.appended == 0
    assert agents.read_text(encoding="utf-8") == text


def test_a_persons_edit_delete_and_add_become_records(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    _sync(mem, agents)
    text = agents.read_text(encoding="utf-8")
    text = text.replace("Never force-push main.", "Never force-push any shared branch.")
    text = text.replace("- Fact: \\[project:x\\] Staging needs the VPN.\n", "")
    text = text.replace(END, "- Avoid: Deploying on Fridays.\n" + END)
    agents.write_text(text, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.appended == 4  # the edit: entry and tombstone; a tombstone; an entry
    assert _texts(mem) == [
        "Deploying on Fridays.",
        "Never force-push any shared branch.",
        "Use uv, not pip.",
    ]
    added = next(e for e in mem.view().entries if e.text == "Deploying on Fridays.")
    assert added.source == "bridge:agents-md@m1"
    assert added.kind == "avoid"
    assert added.scope == "global"  # a line that names no scope: the block's home
    assert _outside(agents) == PERSON
    # The block now reads as the person left it: nothing more to take from it.
    assert sorted(_block(agents)) == sorted(
        [
            "- Preference (said by the person): Use uv, not pip.",
            "- Avoid: Never force-push any shared branch.",
            "- Avoid: Deploying on Fridays.",
        ]
    )
    assert _sync(mem, agents).appended == 0


def test_the_same_edit_gives_the_same_id_on_two_machines(tmp_path: Path) -> None:
    seed = {"id": "5eed00000001", "kind": "fact", "text": "Old text.", "created_at": T0}
    ids = []
    for machine in ("a", "b"):
        home = tmp_path / machine
        home.mkdir()
        m = Memory.open(home / "me.jsonl")
        with open(m.path, "ab") as f:  # the same record on both machines, as after a sync
            f.write(json.dumps(seed).encode() + b"\n")
        agents = home / "AGENTS.md"
        bridge = Bridge(agents, "agents-md")
        sync_bridge(m.path, bridge, machine=machine, state_dir=home / "state")
        agents.write_text(agents.read_text().replace("Old text.", "New text."))
        sync_bridge(m.path, bridge, machine=machine, state_dir=home / "state")
        [entry] = m.view().entries
        assert entry.text == "New text."
        assert entry.supersedes == "5eed00000001"
        assert entry.source == f"bridge:agents-md@{machine}"
        ids.append(entry.id)
    assert ids[0] == ids[1]


def test_a_vanished_block_is_no_deletion(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    _sync(mem, agents)
    agents.write_text("# Rewritten by an agent\n- one fact\n", encoding="utf-8")
    res = _sync(mem, agents)
    assert res.appended == 0
    assert any("the block was gone" in n for n in res.notes)
    assert len(mem.view().entries) == 3
    assert _outside(agents) == "# Rewritten by an agent\n- one fact\n"


def test_a_reshaped_block_is_no_deletion(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    _sync(mem, agents)
    span = locate(agents.read_text(encoding="utf-8"))
    assert span is not None
    agents.write_text(
        f"{BEGIN}\n## Memory\nUse uv. Never force-push.\n{END}\n{PERSON}", encoding="utf-8"
    )
    res = _sync(mem, agents)
    assert res.appended == 0
    assert any("changed shape" in n for n in res.notes)
    assert len(mem.view().entries) == 3
    assert len(_block(agents)) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t + BEGIN + "\n- x\n" + END + "\n",  # a second block
        lambda t: t.replace(END + "\n", ""),  # an end marker deleted
        lambda t: t.replace(BEGIN, BEGIN + "\n" + BEGIN),  # a duplicated marker
    ],
)
def test_damaged_markers_are_refused_and_the_file_left_alone(
    mem: Memory, tmp_path: Path, damage: Any
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    _sync(mem, agents)
    damaged = damage(agents.read_text(encoding="utf-8"))
    agents.write_text(damaged, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.refused is not None
    assert str(agents) in res.refused
    assert "marker" in res.refused
    assert agents.read_text(encoding="utf-8") == damaged
    assert res.appended == 0


def test_a_marker_of_another_shape_is_refused(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(AGENTS_MD, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.refused is not None
    assert "line 22: a memsync begin marker" in res.refused
    assert agents.read_text(encoding="utf-8") == AGENTS_MD


def test_a_symlink_is_written_through_and_kept(mem: Memory, tmp_path: Path) -> None:
    repo = tmp_path / "dotfiles"
    repo.mkdir()
    target = repo / "AGENTS.md"
    target.write_text(PERSON, encoding="utf-8")
    target.chmod(0o644)
    link = tmp_path / "AGENTS.md"
    link.symlink_to(target)
    assert _sync(mem, link).written
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _outside(target) == PERSON


def test_a_read_only_target_is_refused_with_the_reason(mem: Memory, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes read-only files")
    store = tmp_path / "store"
    store.mkdir()
    target = store / "AGENTS.md"
    target.write_text(PERSON, encoding="utf-8")
    target.chmod(0o444)
    store.chmod(0o555)
    link = tmp_path / "AGENTS.md"
    link.symlink_to(target)
    try:
        res = _sync(mem, link)
    finally:
        store.chmod(0o755)
    assert res.refused is not None
    assert "read-only" in res.refused
    assert target.read_text(encoding="utf-8") == PERSON


def test_claude_md_is_never_created_beside_agents_md(mem: Memory, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(PERSON, encoding="utf-8")
    sub = tmp_path / "pkg"
    sub.mkdir()
    for path in (
        tmp_path / "CLAUDE.md",
        sub / "CLAUDE.local.md",
        tmp_path / ".claude" / "CLAUDE.md",
    ):
        path.parent.mkdir(exist_ok=True)
        res = _sync(mem, path, "claude-md")
        assert res.refused is not None
        assert "AGENTS.md" in res.refused
        assert not path.exists()


def test_a_missing_file_is_created_0600(mem: Memory, tmp_path: Path) -> None:
    claude = tmp_path / "CLAUDE.md"
    assert _sync(mem, claude, "claude-md").written
    assert stat.S_IMODE(claude.stat().st_mode) == 0o600
    assert claude.read_text(encoding="utf-8").startswith(BEGIN)


def test_gemini_legacy_section_is_left_alone_and_the_block_goes_above(
    mem: Memory, tmp_path: Path
) -> None:
    gemini = tmp_path / "GEMINI.md"
    gemini.write_text(GEMINI_MD, encoding="utf-8")
    _sync(mem, gemini, "gemini-md")
    text = gemini.read_text(encoding="utf-8")
    assert text.count("## Gemini Added Memories") == GEMINI_MD.count("## Gemini Added Memories")
    assert text.index(END) < text.index("## Gemini Added Memories")
    assert _outside(gemini) == GEMINI_MD


def test_gemini_legacy_bullets_come_in_once_and_are_not_shown_twice(
    mem: Memory, tmp_path: Path
) -> None:
    gemini = tmp_path / "GEMINI.md"
    gemini.write_text(GEMINI_MD, encoding="utf-8")
    res = _sync(mem, gemini, "gemini-md")
    assert res.appended == 3  # the staging IP is in both sections: one memory
    _, imported = vendor_records("gemini-md", gemini)
    ids = {obj["id"] for _, obj in imported}  # the importer's ids: one memory, one id
    legacy = [e for e in mem.view().entries if e.id in ids]
    assert sorted(e.text for e in legacy) == [
        "My preferred programming language is Python.",
        "Release notes go in CHANGELOG.md.",
        "The staging server IP is 10.0.0.5.",
    ]
    assert {e.source for e in legacy} == {"bridge:gemini-md@m1"}
    assert not any("10.0.0.5" in line for line in _block(gemini))  # the file shows it
    assert _sync(mem, gemini, "gemini-md").appended == 0


def test_crlf_files_keep_their_line_endings(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    original = PERSON.replace("\n", "\r\n").encode()
    agents.write_bytes(original)
    _sync(mem, agents)
    data = agents.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
    span = locate(data.decode())
    assert span is not None
    assert data.decode()[span.stop :].encode() == original


def test_a_frontmatter_stays_first(mem: Memory, tmp_path: Path) -> None:
    rules = tmp_path / "memsync.mdc"
    front = "---\ndescription: memory\nalwaysApply: true\n---\n"
    rules.write_text(front + "Body.\n", encoding="utf-8")
    _sync(mem, rules, "markdown")
    assert rules.read_text(encoding="utf-8").startswith(front + BEGIN)


def test_codex_budget_counts_the_files_own_text(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    own = ("x" * 99 + "\n") * 320  # 32,000 bytes of the person's
    agents.write_text(own, encoding="utf-8")
    for n in range(40):
        mem.add("fact", f"A fact long enough to need room, number {n}.")
    res = _sync(mem, agents)
    assert res.written
    assert len(agents.read_bytes()) <= 32 * 1024
    assert any("left out to fit the budget" in n for n in res.notes)
    agents.write_text("y" * 33_000, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.refused is not None
    assert "budget" in res.refused


def test_secrets_are_never_written_nor_ingested(mem: Memory, tmp_path: Path) -> None:
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    raw = {
        "id": "5ec7e7000001",
        "kind": "fact",
        "text": f"the token is {key}",
        "created_at": "2026-01-01T00:00:00Z",
    }
    with open(mem.path, "ab") as f:  # as another machine's merge may bring it
        f.write(json.dumps(raw).encode() + b"\n")
    agents = tmp_path / "AGENTS.md"
    res = _sync(mem, agents)
    assert key not in agents.read_text(encoding="utf-8")
    assert any("look like secrets" in n for n in res.notes)
    text = agents.read_text(encoding="utf-8").replace(END, f"- Fact: new token {key}\n{END}")
    agents.write_text(text, encoding="utf-8")
    res = _sync(mem, agents)
    assert res.appended == 0
    assert any("looks like a secret" in n for n in res.notes)
    assert key not in agents.read_text(encoding="utf-8")


def test_remove_leaves_the_file_as_it_was(mem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_bytes(AGENTS.encode())
    _sync(mem, agents)
    assert remove_block(agents, state_dir=tmp_path / "state")
    assert agents.read_bytes() == AGENTS.encode()
    assert not remove_block(agents, state_dir=tmp_path / "state")


def test_a_file_written_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text(PERSON, encoding="utf-8")
    snap = read_bridged(path)
    path.write_text(PERSON + "- an agent's line\n", encoding="utf-8")  # while memsync renders
    assert not replace_if_unchanged(snap, b"memsync's version\n")
    assert path.read_text(encoding="utf-8") == PERSON + "- an agent's line\n"
    assert [p.name for p in tmp_path.iterdir()] == ["AGENTS.md"]  # no temp file left
    created = tmp_path / "NEW.md"
    snap = read_bridged(created)
    created.write_text("someone's\n", encoding="utf-8")
    assert not replace_if_unchanged(snap, b"memsync's\n")
    assert created.read_text(encoding="utf-8") == "someone's\n"


def test_a_crash_between_writing_the_file_and_confirming_it_reads_no_edit(
    tmp_path: Path,
) -> None:
    """A kill -9 after the file was replaced and before what was rendered was confirmed:
    the next sync reads the block against the pending rendering, so an entry another
    machine superseded meanwhile is not taken for the person's edit (a duplicate)."""
    m = Memory.open(tmp_path / "me.jsonl")
    old = m.add("fact", "The build takes 45 s.")
    agents = tmp_path / "AGENTS.md"
    bridge = Bridge(agents, "agents-md")
    state = tmp_path / "state"
    sync_bridge(m.path, bridge, machine="m1", state_dir=state)
    [saved] = state.glob("bridges/*.json")
    first = json.loads(saved.read_bytes())["confirmed"]
    m.supersede(old.id, "The build takes 30 s.")  # as a merge from another machine
    sync_bridge(m.path, bridge, machine="m1", state_dir=state)
    second = json.loads(saved.read_bytes())["confirmed"]
    saved.write_text(json.dumps({"confirmed": first, "pending": second}))  # the crash
    res = sync_bridge(m.path, bridge, machine="m1", state_dir=state)
    assert res.appended == 0
    assert [e.text for e in m.view().entries] == ["The build takes 30 s."]


def test_without_a_record_of_rendering_only_new_lines_are_taken(
    mem: Memory, tmp_path: Path
) -> None:
    """The state directory lost (or the file brought by a dotfiles tool): a line deleted
    since is not taken for a deletion, a forgotten entry's line does not come back, and a
    line the person added is not lost."""
    agents = tmp_path / "AGENTS.md"
    _sync(mem, agents)
    text = agents.read_text(encoding="utf-8")
    staging = next(e for e in mem.view().entries if e.text == "Staging needs the VPN.")
    mem.forget(staging.id)  # forgotten elsewhere; the old block still shows it
    text = text.replace("- Avoid: Never force-push main.\n", "")  # deleted: not taken
    agents.write_text(text.replace(END, f"- Fact: A line the person added.\n{END}"))
    for state in (tmp_path / "state").rglob("*.json"):
        state.unlink()
    res = _sync(mem, agents)
    assert res.appended == 1
    assert _texts(mem) == ["A line the person added.", "Never force-push main.", "Use uv, not pip."]
    assert any("no record of rendering" in n for n in res.notes)


def test_one_sync_of_a_bridge_at_a_time(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon's sync and `memsync bridge sync` never read the same edits twice: the
    second waits for the first (here: gives up, with the reason)."""
    agents = tmp_path / "AGENTS.md"
    hold = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from memsync.local.bridges import one_sync_at_a_time\n"
        "from memsync.local.statedir import StateDir\n"
        "with one_sync_at_a_time(StateDir(Path(sys.argv[1])), Path(sys.argv[2])):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(30)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path / "state"), str(agents)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        monkeypatch.setattr("memsync.local.bridges.LOCK_SECONDS", 0.2)
        res = _sync(mem, agents)
        assert res.refused is not None
        assert "another memsync is syncing it" in res.refused
        assert not agents.exists()
    finally:
        holder.kill()
        holder.communicate()
    assert _sync(mem, agents).written


KILLED_AT_RENAME = """
import os, sys
from pathlib import Path
from memsync.local import bridge_files
from memsync.local.bridges import Bridge, sync_bridge

memory, path, state, when = sys.argv[1:]
replace_held, swap = bridge_files._replace_held, bridge_files._swap

def killed_before(*args):  # the temp file is written and synced: kill -9 before it goes in
    os.kill(os.getpid(), 9)

def killed_after(a, b):  # swapped in: the old file lies at the temp file's name
    swap(a, b)
    os.kill(os.getpid(), 9)

if when == "before":
    bridge_files._replace_held = killed_before
else:
    bridge_files._swap = killed_after
sync_bridge(memory, Bridge(Path(path), "agents-md"), machine="m1", state_dir=state)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_at_the_replace_leaves_the_file_whole_and_no_temp_behind(
    mem: Memory, tmp_path: Path, when: str
) -> None:
    from memsync.local import bridge_files

    if when == "after" and bridge_files._swap_call() is None:
        pytest.skip("this system swaps no files")
    agents = tmp_path / "AGENTS.md"
    agents.write_text(PERSON, encoding="utf-8")
    os.utime(agents, (time.time() - 60, time.time() - 60))
    args = [str(mem.path), str(agents), str(tmp_path / "st"), when]
    done = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, *args], check=False)
    assert done.returncode == -9
    if when == "before":
        assert agents.read_text(encoding="utf-8") == PERSON  # the old file, whole
    else:
        assert _outside(agents) == PERSON  # the new one, whole
    assert len(list(tmp_path.glob(".AGENTS.md.memsync-*"))) == 1  # what the kill left
    bridge = Bridge(agents, "agents-md")
    res = sync_bridge(mem.path, bridge, machine="m1", state_dir=tmp_path / "st")
    assert res.written == (when == "before")
    assert res.appended == 0  # the pending rendering is not read as edits
    assert _outside(agents) == PERSON
    assert list(tmp_path.glob(".AGENTS.md.memsync-*")) == []


_LINE = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=30).filter(
    lambda x: "memsync" not in x.lower() and not x.lstrip().startswith(("```", "~~~"))
)


@settings(max_examples=examples(0.2), deadline=None)
@given(
    st.lists(_LINE, max_size=6),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.lists(st.text(min_size=1, max_size=40), max_size=5),
)
def test_sync_then_remove_gives_back_the_exact_bytes(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    newline: str,
    final: bool,
    texts: list[str],
) -> None:
    root = tmp_path_factory.mktemp("prop")
    mem = Memory.open(root / "me.jsonl")
    for text in texts:
        with contextlib.suppress(MemsyncError):  # a text that looks like a secret: refused
            mem.add("fact", text)
    original = newline.join(lines) + (newline if final and lines else "")
    agents = root / "AGENTS.md"
    agents.write_bytes(original.encode("utf-8"))
    os.utime(agents, (0, 0))  # written long ago: no wait for it to be still
    res = sync_bridge(mem.path, Bridge(agents, "agents-md"), machine="m1", state_dir=root / "st")
    assert res.refused is None
    text = agents.read_bytes().decode("utf-8")
    span = locate(text)
    assert span is not None
    assert text[: span.start] + text[span.stop :] == original
    again = sync_bridge(mem.path, Bridge(agents, "agents-md"), machine="m1", state_dir=root / "st")
    assert not again.written
    assert again.appended == 0
    os.utime(agents, (0, 0))
    assert remove_block(agents, state_dir=root / "st")
    assert agents.read_bytes() == original.encode("utf-8")
