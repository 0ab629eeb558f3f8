"""`memsync.local.claude_bridge`: a memory kept in step with Claude Code's auto-memory
folder (issue 22), on folders shaped like Claude's (tests/helpers/vendor_files.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from memsync.core.bridge_block import BEGIN, END, Selection, locate
from memsync.local.bridge_files import BridgeRefused
from memsync.local.bridges import Bridge
from memsync.local.claude_bridge import find_memory_folder, git_root, sync_claude_bridge
from memsync.local.importers import vendor_records
from memsync.local.memory import Memory
from tests.helpers.bridges import claude_project
from tests.helpers.vendor_files import CLAUDE_INDEX


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "my_app.v2"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "pkg").mkdir()
    return root


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    return tmp_path / ".claude"


def _sync(mem: Memory, repo: Path, claude: Path, **kw: object) -> object:
    return sync_claude_bridge(
        mem.path,
        Bridge(repo, "claude-auto-memory", Selection()),
        machine="m1",
        state_dir=claude.parent / "state",
        claude_dir=claude,
        **kw,  # type: ignore[arg-type]
    )


def test_the_folder_is_found_by_the_git_root_of_the_sessions(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    # A project whose lossy name is ours ("my-app-v2" and "my_app.v2" encode alike):
    # Claude ran in another repository there, so it is not ours; ours has another name
    # (as when a long name gets a hash).
    other = tmp_path / "src" / "my-app-v2"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    claude_project(claude, other, memories=False, name=re.sub(r"[^A-Za-z0-9]", "-", str(repo)))
    folder = claude_project(claude, repo, cwd=repo / "pkg", name="renamed-3kx9q")
    assert find_memory_folder(repo / "pkg", claude) == folder
    assert git_root(repo / "pkg") == repo
    with pytest.raises(BridgeRefused, match="no Claude Code project folder"):
        find_memory_folder(tmp_path / "elsewhere", claude)


def test_a_linked_worktree_shares_the_main_worktrees_memory(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    linked = tmp_path / "wt"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(linked)], check=True)
    folder = claude_project(claude, repo)
    assert git_root(linked) == repo
    assert find_memory_folder(linked, claude) == folder


def test_claudes_memories_come_in_and_memsyncs_go_out(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("avoid", "Never force-push main; ping @alice first.")
    res = _sync(mem, repo, claude)
    assert res.refused is None  # type: ignore[attr-defined]
    entries = mem.view().entries
    # The same ids `memsync import --from claude-auto-memory` gives: one memory, one id
    # (and the importer never reads memsync's own files back).
    _, imported = vendor_records("claude-auto-memory", folder)
    claude_ids = {
        obj["id"] for _, obj in imported if obj["text"] != "Staging deploys need the VPN."
    }
    assert claude_ids <= {e.id for e in entries}
    assert {e.source for e in entries if e.id in claude_ids} == {"bridge:claude-auto-memory@m1"}
    ours = sorted(p.name for p in folder.glob("memsync_*.md"))
    assert len(ours) == 1  # only the entry Claude's files do not hold: nothing twice
    body = (folder / ours[0]).read_text()
    assert body.startswith('---\nname: "Never force-push main; ping \uff20alice first."\n')
    assert "type: feedback\n---\n\nNever force-push main; ping \\@alice first.\n" in body
    index = (folder / "MEMORY.md").read_text()
    assert index.startswith(CLAUDE_INDEX)  # Claude's lines as they were
    span = locate(index)
    assert span is not None
    assert span.inner == (
        (
            f"- [Never force-push main; ping \\@alice first.]({ours[0]}) — "
            "Never force-push main; ping \\@alice first."
        ),
    )
    # A second sync: nothing new either way.
    snapshot = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    lines = mem.path.read_bytes()
    again = _sync(mem, repo, claude)
    assert again.appended == 0  # type: ignore[attr-defined]
    assert mem.path.read_bytes() == lines
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == snapshot


def test_claudes_edit_supersedes_and_its_deletion_tombstones(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    _sync(mem, repo, claude)
    role = folder / "user_role.md"
    role.write_text(role.read_text().replace("terse answers", "answers with examples"))
    (folder / "debugging.md").unlink()
    res = _sync(mem, repo, claude)
    assert res.appended == 3  # type: ignore[attr-defined]  # entry + tombstone; tombstone
    texts = [e.text for e in mem.view().entries]
    assert any("answers with examples" in t for t in texts)
    assert not any("terse answers without" in t for t in texts)
    assert not any("Auth tokens rotate" in t for t in texts)
    # Read again, the files say nothing new (an edit is taken once).
    assert _sync(mem, repo, claude).appended == 0  # type: ignore[attr-defined]
    assert _sync(mem, repo, claude).appended == 0  # type: ignore[attr-defined]


def test_a_memory_forgotten_elsewhere_leaves_claudes_folder_too(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    _sync(mem, repo, claude)
    debugging = next(e for e in mem.view().entries if "Auth tokens rotate" in e.text)
    mem.forget(debugging.id)  # as a deletion arriving from another machine
    res = _sync(mem, repo, claude)
    assert not (folder / "debugging.md").exists()
    index = (folder / "MEMORY.md").read_text()
    assert "(debugging.md)" not in index  # its pointer went with it, nothing else did
    assert index.startswith(
        CLAUDE_INDEX.replace(
            "- [Debugging patterns](debugging.md) — auth token rotation, DB connection troubleshooting\n",
            "",
        )
    )
    assert (folder / "user_role.md").exists()
    assert res.appended == 0  # type: ignore[attr-defined]
    assert _sync(mem, repo, claude).appended == 0  # type: ignore[attr-defined]


def test_every_file_gone_at_once_is_no_deletion(repo: Path, claude: Path, tmp_path: Path) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    _sync(mem, repo, claude)
    count = len(mem.view().entries)
    for p in folder.glob("*.md"):
        if p.name != "MEMORY.md":
            p.unlink()
    res = _sync(mem, repo, claude)
    assert res.appended == 0  # type: ignore[attr-defined]
    assert any("gone at once" in n for n in res.notes)  # type: ignore[attr-defined]
    assert len(mem.view().entries) == count


def test_claude_editing_memsyncs_file_supersedes_its_entry(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    old = mem.add("fact", "The build takes 45 s.")
    _sync(mem, repo, claude)
    [ours] = folder.glob("memsync_*.md")
    ours.write_text(ours.read_text().replace("45 s.", "30 s."))
    _sync(mem, repo, claude)
    texts = [e.text for e in mem.view().entries]
    assert "The build takes 30 s." in texts
    assert "The build takes 45 s." not in texts
    new = next(e for e in mem.view().entries if e.text == "The build takes 30 s.")
    assert new.supersedes == old.id
    [now_ours] = folder.glob("memsync_*.md")
    assert now_ours.name != ours.name


def test_the_index_keeps_within_200_lines_with_claudes_own(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    for n in range(300):
        mem.add("fact", f"Fact number {n}.", confidence=0.5 + n / 1000)
    res = _sync(mem, repo, claude)
    index = (folder / "MEMORY.md").read_text()
    assert len(index.splitlines()) <= 200
    assert len(index.encode()) <= 25_000
    assert any("left out to fit MEMORY.md" in n for n in res.notes)  # type: ignore[attr-defined]
    span = locate(index)
    assert span is not None
    assert len(list(folder.glob("memsync_*.md"))) == len(span.inner) - 1  # one left-out line
    assert "Fact number 299." in index  # the highest confidence kept
    assert index.count(BEGIN) == 1
    assert index.count(END) == 1


def test_claude_rewriting_its_index_never_shows_a_memory_twice(
    repo: Path, claude: Path, tmp_path: Path
) -> None:
    """Claude rewrites an over-long MEMORY.md whole: here it kept memsync's pointers but
    dropped the markers. The block comes back, the copies go, Claude's lines stay."""
    folder = claude_project(claude, repo)
    mem = Memory.open(tmp_path / "me.jsonl")
    mem.add("fact", "The build takes 45 s.")
    _sync(mem, repo, claude)
    index = folder / "MEMORY.md"
    span = locate(index.read_text())
    assert span is not None
    rewritten = "# Memory Index\n" + "".join(x + "\n" for x in span.inner)
    rewritten += "- [Debugging patterns](debugging.md) — auth tokens\n"
    index.write_text(rewritten)
    res = _sync(mem, repo, claude)
    assert res.appended == 0  # type: ignore[attr-defined]
    text = index.read_text()
    [ours] = folder.glob("memsync_*.md")
    assert text.count(f"({ours.name})") == 1
    assert text.startswith("# Memory Index\n- [Debugging patterns](debugging.md) — auth tokens\n")
    assert locate(text) is not None
