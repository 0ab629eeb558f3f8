"""Commands that append to a memory file: add, forget.

They are what an agent runs most often, so this module imports only what appending needs:
no view, no located scan, no merge index (issue 20: `add` within 3x the interpreter's own
start-up).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memsync.cli._common import EXIT_OK
from memsync.core.timestamps import format_ts
from memsync.local.memory import Memory
from memsync.local.targets import require_memory_target

if TYPE_CHECKING:
    import argparse

__all__ = ["cmd_add", "cmd_forget"]


_KEY_LIKE = re.compile(r"[A-Za-z0-9+/_=-]{43,}")
"""A run as long as a 32-byte key in base64 (43+) or hex (64): only then is the config read
to compare with this machine's hub keys (reading it costs more than the rest of `add`)."""


def _own_keys_if_key_like(args: argparse.Namespace) -> tuple[str, ...]:
    """This machine's hub keys in every printed form, when the entry holds a run that could
    be one (issue 24, item 5; `msk1-...` is refused by the secret shapes in any case)."""
    blob = "\n".join([args.text, args.scope, args.source or "", *args.tag])
    if not _KEY_LIKE.search(blob):
        return ()
    from memsync.cli._keys import config_or_default
    from memsync.config.wiring import own_key_forms

    return own_key_forms(config_or_default(None))


def cmd_add(args: argparse.Namespace) -> int:
    require_memory_target(args.file)  # never JSON appended to notes.txt (issue 24, item 6)
    mem = Memory.open(args.file, refused=_own_keys_if_key_like(args))
    if args.supersedes is not None:  # not a write that replaces nothing (rule 10)
        mem.check_supersession(args.supersedes, args.source)
    entry = mem.add_record(
        args.kind,
        args.text,
        scope=args.scope,
        tags=args.tag,
        source=args.source,
        confidence=args.confidence,
        expires_at=format_ts(args.expires_at) if args.expires_at is not None else None,
        supersedes=args.supersedes,
    )
    print(entry.id)
    return EXIT_OK


def cmd_forget(args: argparse.Namespace) -> int:
    Memory.open(args.file, create=False).forget_record(args.id)
    return EXIT_OK
