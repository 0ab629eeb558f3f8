"""The CLI's logging set-up, applied when memsync first logs (`memsync.local.logs`)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.local import logs


def test_a_set_up_kept_is_applied_at_the_first_logger() -> None:
    """What `cli.main` configures before `logging` is imported is in place when a module
    first asks for its logger: INFO with one `-v`, on stderr as `memsync: ...`, not
    passed to the root logger."""
    code = (
        "import sys\n"
        "from memsync.local import logs\n"
        "logs.configure(1)\n"
        "assert 'logging' not in sys.modules\n"
        "logs.get_logger('memsync.local.drain').info('told at -v')\n"
        "logs.get_logger('memsync.local.drain').debug('not at -v')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stderr == "memsync: told at -v\n"


def test_configure_applies_at_once_when_logging_is_imported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(0)
    logger = logging.getLogger("memsync")
    assert not logger.propagate
    assert logger.level == logging.WARNING
    logging.getLogger("memsync.x").warning("a warning")
    logging.getLogger("memsync.x").info("no info")
    assert capsys.readouterr().err == "memsync: a warning\n"


def test_a_set_up_dropped_is_not_applied_later() -> None:
    """`cli.main` drops at its end a set-up nothing logged under: a library call made
    after it in the same process configures nothing (STYLE guideline 10)."""
    code = (
        "from memsync.local import logs\n"
        "logs.configure(2)\n"
        "logs.unconfigured()\n"
        "logger = logs.get_logger('memsync')\n"
        "import logging\n"
        "print(logger.handlers, logger.level == logging.NOTSET, logger.propagate)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[] True True"


def test_the_cli_warns_through_the_set_up(tmp_path: Path) -> None:
    """A bad line read by a command in its own process is reported as `memsync: ...` on
    stderr, though the command imported no `logging` before it."""
    memory = tmp_path / "me.jsonl"
    memory.write_text(
        '{"format": "agent-memory/0.1", "created_at": "2026-01-01T00:00:00Z"}\n{bad\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "memsync", "show", str(memory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stderr == "memsync: 1 bad line(s) skipped; `memsync check` lists them\n"
