"""The argument parser of `memsync`: argparse, with its errors as one `memsync: ...` line.

Imported only when a parser is built (`--help`, and the command lines
`memsync.cli._quickargs` leaves to argparse)."""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from memsync.errors import SHOWN_CHARS, UsageError, shown

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one `memsync: ...` line and exit status 2."""

    building = False
    """True while `memsync.cli` builds its parsers. argparse makes a formatter at each
    `add_argument` only to check the argument's metavar, and a formatter measures the
    terminal (importing `shutil`, with bz2 and lzma: about 2 ms of `memsync add`'s
    start-up, issue 20); a width is of no use there. Help and usage are formatted after
    the build, at the terminal's width as always."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        if Parser.building and self.formatter_class is argparse.HelpFormatter:
            return argparse.HelpFormatter(prog=self.prog, width=80)
        return super()._get_formatter()

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == "memsync" else f"{self.prog}: "
        # argparse quotes what was typed ("invalid choice: '...'"): at most a prefix of it.
        message = _LONG_QUOTE.sub(lambda m: shown(m[1]), message)
        raise UsageError(f"{where}{message} (see --help)")


_LONG_QUOTE = re.compile(rf"'([^']{{{SHOWN_CHARS + 1},}})'")
