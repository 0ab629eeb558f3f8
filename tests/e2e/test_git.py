"""Memory files in a git repository, with real `git` (issue 22, item 6).

Two clones of a bare repository, each set up with `memsync git setup`, write divergent
histories into one memory file (entries, tombstones, supersessions, made with the
`memsync` command line), commit, and meet through `git pull` (a merge) and
`git pull --rebase`: no conflict, and each clone's view is the view of the union of both
histories (`memsync show` of the two files before the merge, read together). A bad line
committed on one side makes the merge a conflict that keeps both sides' bytes.

git runs with HOME in the test's folder and GIT_CONFIG_NOSYSTEM set, so no config of the
machine's takes part; each clone sets its own user.name and user.email.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]

MEMORY = "memory/me.jsonl"


class Env:
    def __init__(self, tmp: Path) -> None:
        home = tmp / "home"
        home.mkdir()
        self.env = {
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_STATE_HOME": str(home / ".state"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }
        self.env.pop("GIT_CONFIG_GLOBAL", None)
        self.env.pop("MEMSYNC_CONFIG", None)

    def git(self, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"git {' '.join(args)}: {done.stdout}{done.stderr}"
        return done

    def memsync(self, cwd: Path, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "memsync", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"memsync {' '.join(args)}: {done.stderr}"
        return done.stdout

    def clone(self, tmp: Path, hub: Path, name: str) -> Path:
        self.git(tmp, "clone", "-q", str(hub), name)
        repo = tmp / name
        self.git(repo, "config", "user.name", name)
        self.git(repo, "config", "user.email", f"{name}@example.com")
        self.memsync(repo, "git", "setup", "*.jsonl")
        return repo

    def add(self, repo: Path, text: str, *more: str) -> str:
        return self.memsync(repo, "add", MEMORY, "--kind", "fact", "--text", text, *more).strip()

    def commit(self, repo: Path, message: str) -> None:
        self.git(repo, "add", "-A")
        self.git(repo, "commit", "-q", "-m", message)

    def view(self, repo: Path, *files: Path) -> list[dict[str, Any]]:
        paths = [str(f) for f in files] or [MEMORY]
        out: list[dict[str, Any]] = json.loads(self.memsync(repo, "show", "--json", *paths))
        return out


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def _start(env: Env, tmp: Path) -> tuple[Path, Path, Path]:
    hub = tmp / "hub.git"
    env.git(tmp, "init", "-q", "--bare", "-b", "main", str(hub))
    a = env.clone(tmp, hub, "a")
    env.git(a, "checkout", "-q", "-b", "main")
    (a / "memory").mkdir()
    kept = env.add(a, "The build runs on Debian 12.")
    env.add(a, "Deploys happen on Fridays.")
    env.commit(a, "first memories")
    env.git(a, "push", "-q", "origin", "main")
    b = env.clone(tmp, hub, "b")
    assert kept in (b / MEMORY).read_text()
    return hub, a, b


def _diverge(env: Env, a: Path, b: Path, round_: int) -> list[dict[str, Any]]:
    """Each clone appends, forgets and supersedes on its own, and commits; A pushes.
    Returns the view of both histories together."""
    first = env.view(a)
    env.add(a, f"A learned thing {round_}.")
    env.memsync(a, "forget", MEMORY, first[0]["id"])
    # The last entry an agent wrote: one the person said takes their word (rule 10).
    agents = [e for e in first if e["source"] != "user"]
    env.add(a, f"Deploys happen on Tuesdays ({round_}).", "--supersedes", agents[-1]["id"])
    env.commit(a, f"a, round {round_}")
    env.git(a, "push", "-q", "origin", "main")
    env.add(b, f"B learned thing {round_}.", "--source", "user")
    env.add(b, f"B's second thing {round_}.")
    env.memsync(b, "forget", MEMORY, env.view(b)[-1]["id"])
    env.commit(b, f"b, round {round_}")
    union = env.view(b, a / MEMORY, b / MEMORY)
    assert union != env.view(a)
    assert union != env.view(b)
    return union


def test_pull_merge_and_pull_rebase_merge_memory_without_conflict(env: Env, tmp_path: Path) -> None:
    _, a, b = _start(env, tmp_path)
    attributes = (a / ".gitattributes").read_text()
    assert attributes == "*.jsonl merge=memsync\n"
    assert "merge-driver %O %A %B %P" in env.git(a, "config", "merge.memsync.driver").stdout

    union = _diverge(env, a, b, 1)
    pulled = env.git(b, "pull", "--no-rebase", "--no-edit", "origin", "main")
    assert "CONFLICT" not in pulled.stdout + pulled.stderr
    assert env.view(b) == union
    assert env.git(b, "status", "--porcelain").stdout == ""
    env.git(b, "push", "-q", "origin", "main")
    env.git(a, "pull", "-q", "--no-rebase", "origin", "main")
    assert env.view(a) == union

    union = _diverge(env, a, b, 2)
    pulled = env.git(b, "pull", "--rebase", "origin", "main")
    assert "CONFLICT" not in pulled.stdout + pulled.stderr
    assert env.view(b) == union
    log = env.git(b, "log", "--format=%s").stdout.splitlines()
    assert log[:2] == ["b, round 2", "a, round 2"]  # replayed on top: no merge commit
    env.git(b, "push", "-q", "origin", "main")
    env.git(a, "pull", "-q", "--rebase", "origin", "main")
    assert env.view(a) == union
    assert (a / MEMORY).read_bytes() == (b / MEMORY).read_bytes()


def test_a_bad_line_from_the_other_side_is_a_conflict_that_keeps_both(
    env: Env, tmp_path: Path
) -> None:
    _, a, b = _start(env, tmp_path)
    with (a / MEMORY).open("ab") as f:
        f.write(b"{this is not json\n")
    env.commit(a, "a, by hand")
    env.git(a, "push", "-q", "origin", "main")
    env.add(b, "From B.")
    env.commit(b, "b")
    done = env.git(b, "pull", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert done.returncode != 0
    assert "CONFLICT" in done.stdout
    assert "me.jsonl (theirs):4: bad line" in done.stderr + done.stdout
    # Nothing is lost: git keeps both versions for the person to settle.
    assert "From B." in env.git(b, "show", f":2:{MEMORY}").stdout
    assert "{this is not json" in env.git(b, "show", f":3:{MEMORY}").stdout


def _machine(tmp: Path, repo: Path, hub: Path, name: str) -> Path:
    config = tmp / f"{name}.toml"
    config.write_text(
        f'state_dir = "{tmp / f"state-{name}"}"\nreplica = "{name}"\n'
        f'[[memory]]\nname = "me"\npath = "{repo / MEMORY}"\n'
        f'[[remote]]\nname = "nas"\nurl = "{hub}"\n',
        encoding="utf-8",
    )
    return config


def test_a_memory_under_git_syncs_through_a_hub_too(env: Env, tmp_path: Path) -> None:
    """The same file is a git-tracked file and a configured memory with a folder hub: the
    lines the hub brought and the lines git brings are one set (byte-identical copies are
    one line), so pulls merge without conflict or repeats, and a sync after git replaced
    the file changes nothing."""
    _, a, b = _start(env, tmp_path)
    nas = tmp_path / "nas"
    nas.mkdir(mode=0o700)
    cfg_a, cfg_b = _machine(tmp_path, a, nas, "a"), _machine(tmp_path, b, nas, "b")
    env.memsync(a, "sync", "--config", str(cfg_a))
    env.memsync(b, "sync", "--config", str(cfg_b))
    env.add(a, "A wrote this on its own machine.")
    env.memsync(a, "sync", "--config", str(cfg_a))
    env.commit(a, "a")
    env.git(a, "push", "-q", "origin", "main")
    env.add(b, "B wrote this on its own machine.")
    env.memsync(b, "sync", "--config", str(cfg_b))  # brings A's line through the hub
    env.commit(b, "b, with what the hub brought")
    union = env.view(b, a / MEMORY, b / MEMORY)
    pulled = env.git(b, "pull", "--no-rebase", "--no-edit", "origin", "main")
    assert "CONFLICT" not in pulled.stdout + pulled.stderr
    assert env.view(b) == union
    lines = (b / MEMORY).read_bytes().splitlines()
    assert len(lines) == len(set(lines)), "a line twice"
    env.git(b, "push", "-q", "origin", "main")
    env.memsync(a, "sync", "--config", str(cfg_a))  # B's line, through the hub
    env.commit(a, "a, with what the hub brought")
    env.git(a, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert env.view(a) == union
    for repo, cfg in ((a, cfg_a), (b, cfg_b)):
        env.memsync(repo, "sync", "--config", str(cfg))
        assert env.git(repo, "status", "--porcelain").stdout == ""
        assert env.view(repo) == union
