"""The shipped launchd agent (issue 23): the plist parses (plistlib, as launchd reads it),
says what the README says it does, and the README's install step, run as written, makes
a plist with absolute paths under the user's home and nothing left to fill in."""

from __future__ import annotations

import plistlib
import re
import subprocess
from pathlib import Path

from tests.helpers.paths import README, ROOT

PLIST = ROOT / "launchd" / "org.memsync.daemon.plist"


def _block() -> str:
    """The README's launchd block (a `sh` block starting with its comment)."""
    blocks: list[str] = re.findall(
        r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL
    )
    [block] = [b for b in blocks if b.startswith("# macOS: memsync as a launchd agent")]
    return block


def test_the_plist_parses_and_keeps_the_daemon_alive_on_failure() -> None:
    plist = plistlib.loads(PLIST.read_bytes())
    assert plist["Label"] == "org.memsync.daemon"
    assert plist["ProgramArguments"] == ["__HOME__/.local/bin/memsync", "daemon"]
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}  # restarted on a non-zero exit
    assert plist["ThrottleInterval"] >= 10
    assert plist["Umask"] == 0o077
    assert plist["StandardOutPath"] == "__HOME__/Library/Logs/memsync.log"
    assert plist["StandardErrorPath"] == plist["StandardOutPath"]
    assert "/usr/sbin" in plist["EnvironmentVariables"]["PATH"].split(":")  # lsof


def test_the_readme_install_step_makes_a_complete_plist(tmp_path: Path) -> None:
    block = _block()
    steps = [line for line in block.splitlines() if line.startswith(("mkdir", "sed"))]
    assert len(steps) == 2
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(
        ["bash", "-euc", "\n".join(steps)],
        cwd=ROOT,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=30,
    )
    installed = home / "Library" / "LaunchAgents" / "org.memsync.daemon.plist"
    assert (home / "Library" / "Logs").is_dir()
    text = installed.read_text(encoding="utf-8")
    assert "__HOME__" not in text
    plist = plistlib.loads(installed.read_bytes())
    assert plist["ProgramArguments"][0] == f"{home}/.local/bin/memsync"
    assert plist["StandardOutPath"] == f"{home}/Library/Logs/memsync.log"
    # the launchctl lines name the same label and the installed file
    for line in block.splitlines():
        if line.startswith("launchctl"):
            assert "org.memsync.daemon" in line


def test_the_readme_names_the_reload_and_stop_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "launchctl kill SIGHUP gui/$(id -u)/org.memsync.daemon" in text
    assert "launchctl bootout gui/$(id -u)/org.memsync.daemon" in text
