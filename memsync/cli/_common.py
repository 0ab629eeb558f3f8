"""What every command shares: exit codes, the argument parser that reports errors as one
`memsync: ...` line, argument types, and small checks."""

from __future__ import annotations

import contextlib
import io
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeAlias

if TYPE_CHECKING:
    import argparse

from memsync.core.timestamps import parse_ts
from memsync.errors import ConfigError, UsageError, shown
from memsync.local.dirs import DEFAULT_MEMORY_NAME, default_config_path, default_memory_path

__all__ = [
    "EXIT_ERROR",
    "EXIT_FOUND",
    "EXIT_NOT_QUIET",
    "EXIT_OK",
    "SCOPE_HELP",
    "Handler",
    "at_most",
    "buffered_stdout",
    "confidence_arg",
    "configured_memory",
    "existing",
    "non_negative_arg",
    "positive_int_arg",
    "refused",
    "report_bad",
    "timestamp_arg",
]

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_NOT_QUIET = 0, 1, 2, 3

Handler: TypeAlias = "Callable[[argparse.Namespace], int]"
"""A command's function (a string: argparse is imported only to build a parser)."""

SCOPE_HELP = (
    "the task's scope: entries of this scope, of the domains it is a subdomain of, and "
    "global ones (handoff's --within is another filter)"
)


def refused(message: str) -> Exception:
    """An argument type's error: argparse prints `message` as the reason. argparse is
    imported here, when a value is refused, not by the plain command lines that never
    build a parser (`memsync.cli._quickargs`)."""
    import argparse

    return argparse.ArgumentTypeError(message)


def timestamp_arg(text: str) -> int:
    us = parse_ts(text)
    if us is None:
        raise refused(f"not an RFC 3339 timestamp with a zone: {text!r}")
    return us


def confidence_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise refused(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise refused(f"confidence must be from 0 to 1, not {text}")
    return value


def positive_int_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise refused(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise refused(f"must be positive, not {text}")
    return value


def existing(paths: Sequence[Path]) -> list[Path]:
    for p in paths:
        if p.is_dir():
            raise UsageError(f"{p}: is a folder, not a memory file")
        if not p.is_file():
            raise UsageError(f"{p}: no such memory file")
    return list(paths)


def report_bad(bad: Sequence[object], headerless: Sequence[str] = ()) -> None:
    if not headerless and not bad:
        return  # the usual case: no `logging` imported (issue 20)
    from memsync.local.logs import get_logger

    log = get_logger("memsync")
    for name in headerless:  # SEMANTICS rule 2: read all the same, with a warning
        log.warning("%s: no agent-memory header on its first line; read as agent-memory/0.1", name)
    if bad:
        log.warning("%d bad line(s) skipped; `memsync check` lists them", len(bad))


def non_negative_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise refused(f"not a number: {text!r}") from None
    if not value >= 0 or not math.isfinite(value):
        raise refused(f"must be a finite number, 0 or more, not {text}")
    return value


def at_most(maximum: float) -> Callable[[str], float]:
    """An argument type: a finite number from 0 to `maximum` (issue 13, item 17: an
    unbounded `--horizon-days 1e308` overflowed into a traceback)."""

    def parse(text: str) -> float:
        value = non_negative_arg(text)
        if value > maximum:
            raise refused(f"must be from 0 to {maximum:g}, not {text}")
        return value

    return parse


def configured_memory(
    memory: str | None, config_path: Path | None, command: str
) -> tuple[Path, str]:
    """The file and name of `--memory NAME` (left out: the config's only memory).

    The config is `config_path`, else the default config file when it exists, else the
    embedded default, whose one memory is "me" (issue 24, item 17): the same memory for the
    daemon, `mcp`, `prompt` and `sync`. Without a config file the config (pydantic) is not
    even imported: a session-start hook pays nothing for it (issue 14).
    """
    default = default_config_path()
    path = config_path if config_path is not None else default
    if config_path is None and not default.exists():
        if memory in (None, DEFAULT_MEMORY_NAME):
            return default_memory_path(), DEFAULT_MEMORY_NAME
        raise ConfigError(
            str(path),
            "memory",
            f"no memory named {shown(memory)}: there is no config file, and the embedded "
            f"default has one memory, {DEFAULT_MEMORY_NAME!r}",
        )
    from memsync.config import load_config

    mems = {m.name: m for m in load_config(path).memory}
    if memory is None:
        if len(mems) != 1:
            raise UsageError(
                f"{command}: {path}: several memories ({', '.join(sorted(mems))}); "
                "choose one with --memory NAME"
            )
        [mem] = mems.values()
    elif memory in mems:
        mem = mems[memory]
    else:
        raise ConfigError(str(path), "memory", f"no memory named {shown(memory)}")
    return mem.path, mem.name


@contextlib.contextmanager
def buffered_stdout(size: int = 1 << 20) -> Iterator[BinaryIO]:
    """Standard output as bytes, buffered by `size` whatever the environment says: under
    `PYTHONUNBUFFERED` (usual in containers) every write is a system call, and `show
    --json` of a million records made a million of them. Flushed on leaving; standard
    output stays open. Where it is no file (a test's capture), its own buffer."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        yield sys.stdout.buffer
        return
    with open(fd, "wb", buffering=size, closefd=False) as out:
        yield out
